# steadystate build, test and benchmark entry points.
GO ?= go
PKGS ?= ./...

.PHONY: all build run test test-short bench bench-check fuzz clean

all: build

build:
	$(GO) build $(PKGS)

# run: the example agent on its sample desired state, in a private network
# namespace (the host is not changed). Ctrl-C stops it.
run:
	$(GO) run ./examples/agent run --desired examples/agent/desired.yaml

# test: vet, then every package's tests under the race detector, in the
# library and in the benchmarks module (the ratios parser).
test:
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 $(PKGS)
	cd benchmarks && $(GO) vet ./... && $(GO) test -race -count=1 ./...

# bench: the library's own benchmarks, then the comparison with its peers
# (go-memdb, raw go-immutable-radix/v2) in benchmarks/, a module of its own so
# that the peers stay out of the library's dependencies. benchmarks/cmd/ratios
# echoes that run and prints objects/sec per implementation, the ratios and
# the speed targets; it fails if the run failed. bench-check also fails when a
# target is missed. BENCHTIME and BENCHCOUNT (medians are taken) tune the run.
BENCHTIME ?= 1s
BENCHCOUNT ?= 1
BENCHFLAGS = -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(BENCHCOUNT)
bench:
	$(GO) test $(BENCHFLAGS) $(PKGS)
	cd benchmarks && $(GO) test $(BENCHFLAGS) ./... | $(GO) run ./cmd/ratios -echo $(RATIOSFLAGS)

bench-check:
	$(MAKE) bench RATIOSFLAGS=-check

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
