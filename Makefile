# steadystate build, test and benchmark entry points.
GO ?= go
PKGS ?= ./...

.PHONY: all build test test-short bench fuzz clean

all: build

build:
	$(GO) build $(PKGS)

# test: vet, then every package's tests under the race detector.
test:
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 $(PKGS)

# bench: every benchmark with its baselines (see BENCHMARKS.md when present).
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)
	cd benchmarks && $(GO) test -run '^$$' -bench . -benchmem ./...

# fuzz: a short run of every fuzz target (FUZZTIME per target).
FUZZTIME ?= 10s
fuzz:
	@for pkg in $$($(GO) list $(PKGS)); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "== $$pkg $$f"; \
			$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

clean:
	$(GO) clean -testcache
