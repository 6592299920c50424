# steadystate build, test and benchmark entry points.
GO ?= go
PKGS ?= ./...
# The repository's other modules, kept apart so that the library's go.mod
# stays lean: the example targets and agent (netlink, bbolt, fsnotify, and
# the etcd module for fleet mode), the etcd source and status publisher
# (gRPC, the etcd client) and the benchmarks (the peers).
MODULES = examples etcd benchmarks

.PHONY: all build run test test-short test-stress fmt fmt-check lint bench bench-report bench-check bench-short bench-scale bench-profile bench-idle fuzz soak clean

all: build

build:
	$(GO) build $(PKGS)
	for m in $(MODULES); do (cd $$m && $(GO) build ./...) || exit 1; done

# run: the example agent on its sample desired state, in a private network
# namespace (the host is not changed). Ctrl-C stops it.
run:
	@echo "building the example agent (the first build takes a minute or two)..."
	@mkdir -p bin
	cd examples && $(GO) build -o ../bin/agent ./agent
	./bin/agent run --desired examples/agent/desired.yaml

# test: formatting and lint (vet, staticcheck), then every package's tests
# under the race detector, in the library and in every other module.
test: fmt-check lint
	$(GO) test -race -count=1 $(PKGS)
	for m in $(MODULES); do (cd $$m && $(GO) test -race -count=1 ./...) || exit 1; done

# test-stress: the examples module's tests (the kernel targets and the
# agent, which wait for the real system) under the race detector,
# STRESS_RUNS times in a row, beside a CPU hog on every core: a test that
# races a timer instead of waiting for what it checks fails here. Stops at
# the first failing run; the hogs end with it.
STRESS_RUNS ?= 5
test-stress:
	@hogs=""; for i in $$(seq $$(nproc)); do (while :; do :; done) & hogs="$$hogs $$!"; done; \
	trap 'kill $$hogs 2>/dev/null' EXIT INT TERM; \
	for run in $$(seq $(STRESS_RUNS)); do \
		echo "== test-stress: run $$run of $(STRESS_RUNS), $$(nproc) CPU hogs"; \
		(cd examples && $(GO) test -race -count=1 ./...) || exit 1; \
	done; \
	echo "test-stress: $(STRESS_RUNS) of $(STRESS_RUNS) runs passed"

# fmt: rewrites every Go file of the repository with gofmt.
fmt:
	gofmt -w $$(git ls-files -co --exclude-standard '*.go')

# fmt-check: fails, listing them, if any Go file is not gofmt-formatted.
fmt-check:
	@files=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); \
	if [ -n "$$files" ]; then echo "not gofmt-formatted (run make fmt):"; echo "$$files"; exit 1; fi

# lint: go vet and staticcheck (pinned; run with go run so that it stays out
# of the library's go.mod) over every module.
STATICCHECK = $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint:
	$(GO) vet $(PKGS)
	$(STATICCHECK) $(PKGS)
	for m in $(MODULES); do (cd $$m && $(GO) vet ./... && $(STATICCHECK) ./...) || exit 1; done

# --- benchmarks (see BENCHMARKS.md) ---
#
# bench: every benchmark of the project, with its baselines, one package at a
# time (-p 1): the library's own (statedb, reconciler, internal/radix, hive),
# the example targets' against the kernel tools (examples/routes vs
# `ip -batch`, examples/iptables vs `iptables-restore`), and the benchmarks
# module (statedb vs cilium/statedb, go-memdb and raw go-immutable-radix/v2;
# the scaling series at 1k..1M objects; propagation delay under light and
# heavy load), and the etcd module's fleet (100 agents on a 3-member etcd;
# the scale benchmark at 250 agents with their own clients, one change a
# second for 20s; bench-scale runs its curve).
# The output, with a header naming the machine, goes to BENCH_RESULTS in the
# format of `go test -bench` (benchstat reads it). Then bench-report prints
# the summary and the targets, draws the plots and regenerates the tables of
# BENCHMARKS.md. It fails only if a benchmark failed; bench-check fails when
# a headline target is missed. BENCHTIME and BENCHCOUNT (medians are taken)
# tune the run; about 20 minutes with the defaults on 2 cores, 50 with
# BENCHCOUNT=3, about 80 with BENCHCOUNT=5 (the published figures).
BENCHTIME ?= 1s
BENCHCOUNT ?= 1
BENCH_RESULTS ?= benchmarks/results/latest.txt
BENCHFLAGS = -p 1 -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(BENCHCOUNT) -timeout 60m
BENCH_HEADER = { \
	echo "date: $$(date -u +%Y-%m-%dT%H:%M:%SZ)"; \
	echo "go-version: $$($(GO) env GOVERSION)"; \
	echo "cores: $$(nproc)"; \
	sed -n 's/^model name[[:space:]]*: */cpu-model: /p' /proc/cpuinfo | head -n 1; \
	echo "kernel: $$(uname -r)"; \
	echo "benchtime: $(BENCHTIME)"; \
	echo "count: $(BENCHCOUNT)"; \
	echo "cilium-statedb: $$(cd benchmarks && $(GO) list -m -f '{{.Version}}' github.com/cilium/statedb)"; \
	echo; }

bench:
	@mkdir -p $(dir $(BENCH_RESULTS))
	@$(BENCH_HEADER) > $(BENCH_RESULTS).tmp
	$(GO) test $(BENCHFLAGS) $(PKGS) 2>&1 | tee -a $(BENCH_RESULTS).tmp
	for m in $(MODULES); do (cd $$m && $(GO) test $(BENCHFLAGS) ./... 2>&1 | tee -a $(abspath $(BENCH_RESULTS)).tmp); done
	@mv $(BENCH_RESULTS).tmp $(BENCH_RESULTS)
	@$(MAKE) --no-print-directory bench-report

# bench-report: from the last results, without running anything: the summary
# and the targets (benchmarks/cmd/ratios), the SVG plots (benchmarks/cmd/plot,
# into benchmarks/plots) and the generated section of BENCHMARKS.md
# (benchmarks/cmd/report). Fails if the run reported a failure.
bench-report:
	@cd benchmarks && in=$(abspath $(BENCH_RESULTS)); \
	$(GO) run ./cmd/ratios -in $$in; status=$$?; \
	$(GO) run ./cmd/plot -in $$in -out plots && \
	$(GO) run ./cmd/report -in $$in -doc ../BENCHMARKS.md -plots benchmarks/plots && \
	exit $$status

# bench-check: fails unless every headline target is met in the last results
# (running make bench first if there are none), printing each target as met
# or missed with its figures.
bench-check:
	@test -f $(BENCH_RESULTS) || $(MAKE) --no-print-directory bench
	cd benchmarks && $(GO) run ./cmd/ratios -in $(abspath $(BENCH_RESULTS)) -targets-only -check

# bench-short: every benchmark once (-benchtime 1x; -short skips the 1M
# sizes), so that none rots; run by .ci/run. Its figures mean nothing; it
# fails if a benchmark fails. Its output goes to benchmarks/results/short.tmp.
BENCH_SHORT_FLAGS = -short -run '^$$' -bench . -benchmem -benchtime 1x -timeout 20m
bench-short:
	@mkdir -p benchmarks/results
	{ $(GO) test $(BENCH_SHORT_FLAGS) $(PKGS); \
	  for m in $(MODULES); do (cd $$m && $(GO) test $(BENCH_SHORT_FLAGS) ./...); done; } 2>&1 | tee benchmarks/results/short.tmp
	@echo "bench-short: every benchmark ran; one iteration each, so the figures below mean nothing"
	@cd benchmarks && $(GO) run ./cmd/ratios -in results/short.tmp -targets-only

# bench-scale: the fleet at scale (etcd BenchmarkFleetScale; BENCHMARKS.md,
# "Fleet at scale"): FLEET_SCALE_AGENTS simulated agents (100, 250, 500 and
# 1,000), each with its own etcd client, DB, reflector, reconciler, status
# publisher and 1,000 desired objects, on a 3-member etcd v3.7.3, one
# object changed a second for FLEET_SCALE_WINDOW (60s) at each size: the
# initial sync, apply -> every node applied p50/p90/p99, status writes per
# agent per second, etcd's watchers, watch streams and requests per change
# per agent, and heap per agent. About 6 minutes on 2 cores. Not part of
# make bench (which runs the 250-agent size with a 20s window, guarded by
# bench-check); the output, with the machine's load before and after, goes
# to SCALE_RESULTS. Fails if the benchmark fails.
FLEET_SCALE_AGENTS ?= 100,250,500,1000
FLEET_SCALE_WINDOW ?= 60s
SCALE_RESULTS ?= benchmarks/results/scale.txt
bench-scale:
	@mkdir -p $(dir $(SCALE_RESULTS))
	@{ echo "date: $$(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "cores: $$(nproc)"; \
	  sed -n 's/^model name[[:space:]]*: */cpu-model: /p' /proc/cpuinfo | head -n 1; \
	  echo "load-before: $$(cut -d' ' -f1-3 /proc/loadavg)"; echo; } > $(SCALE_RESULTS)
	cd etcd && FLEET_SCALE_AGENTS=$(FLEET_SCALE_AGENTS) FLEET_SCALE_WINDOW=$(FLEET_SCALE_WINDOW) \
		$(GO) test -run '^$$' -bench '^BenchmarkFleetScale$$' -benchtime 1x -timeout 60m . 2>&1 | tee -a $(abspath $(SCALE_RESULTS))
	@echo "load-after: $$(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $(SCALE_RESULTS)
	@grep -q '^ok' $(SCALE_RESULTS) || { echo "bench-scale: the benchmark failed (see $(SCALE_RESULTS))"; exit 1; }

# bench-profile: CPU and allocation profiles of the hottest benchmarks
# (statedb WriteTxn batch=100, statedb Lookup, the reconciler at 100k
# objects, and steadystate's side of the single-object transaction and the
# propagation round trip against cilium), summarized with `go tool pprof
# -top` into benchmarks/results/profiles/*.txt, the evidence of
# BENCHMARKS.md's "What limits us".
PROFILE_DIR = benchmarks/results/profiles
define profile
	cd benchmarks && $(GO) test -run '^$$' -bench '$(2)' -benchtime $(3) \
		-o results/profiles/$(1).test -cpuprofile results/profiles/$(1).cpu.prof \
		-memprofile results/profiles/$(1).mem.prof $(4) | grep Benchmark
	cd $(PROFILE_DIR) && \
	$(GO) tool pprof -top -nodecount=30 $(1).test $(1).cpu.prof > $(1).cpu.txt 2>/dev/null && \
	$(GO) tool pprof -top -nodecount=30 -sample_index=alloc_space $(1).test $(1).mem.prof > $(1).alloc_space.txt 2>/dev/null && \
	$(GO) tool pprof -top -nodecount=30 -sample_index=alloc_objects $(1).test $(1).mem.prof > $(1).alloc_objects.txt 2>/dev/null
endef
bench-profile:
	@mkdir -p $(PROFILE_DIR)
	$(call profile,write-batch100,BenchmarkWriteTxn$$/^batch=100$$/^impl=statedb$$,3s,./statedb)
	$(call profile,lookup,BenchmarkLookup$$/^impl=statedb$$,3s,./statedb)
	$(call profile,reconcile-100k,BenchmarkReconcile$$/^objects=100000$$/^impl=steadystate$$,10x,./scaling)
	$(call profile,write-txn-1,BenchmarkWriteTxn$$/^batch=1$$/^round=0$$/^impl=steadystate$$,3s,./cilium)
	$(call profile,propagation,BenchmarkPropagationDelay$$/^round=0$$/^impl=steadystate$$,3s,./cilium)
	@ls $(PROFILE_DIR)/*.txt

# bench-idle: the example agent's idle cost (examples/agent
# BenchmarkIdleCPU): 10,000 routes, 2,000 rules and 3 sysctls applied with
# the default intervals, then IDLE_DURATION measured after IDLE_WARMUP, the
# CPU of the agent and its children (iptables-save, iptables-restore) as a
# percentage of one core. Fails above 1%. Not part of make bench (it takes
# IDLE_WARMUP + IDLE_DURATION, 12 minutes by default).
IDLE_DURATION ?= 10m
IDLE_WARMUP ?= 2m
bench-idle:
	cd examples && $(GO) test -run '^$$' -bench '^BenchmarkIdleCPU$$' -benchtime 1x -timeout 60m ./agent \
		-idle.duration=$(IDLE_DURATION) -idle.warmup=$(IDLE_WARMUP)

# soak: the example agent's shape (three tables, three reconcilers, a
# loader rewriting the desired state, a Deriver, a change follower) against
# in-memory targets for SOAK_DURATION, printing the live heap every
# SOAK_EVERY; fails if the live heap grows after the warm-up (see
# benchmarks/soak). Not part of `make test` or CI.
SOAK_DURATION ?= 30m
SOAK_EVERY ?= 1m
soak:
	cd benchmarks && $(GO) test -count=1 -timeout 0 -run '^TestSoak$$' -v ./soak \
		-soak.duration=$(SOAK_DURATION) -soak.every=$(SOAK_EVERY)

# fuzz: a short run of every fuzz target (FUZZTIME per target).
FUZZTIME ?= 10s
fuzz:
	@for m in . $(MODULES); do \
		for pkg in $$(cd $$m && $(GO) list ./...); do \
			for f in $$(cd $$m && $(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
				echo "== $$pkg $$f"; \
				(cd $$m && $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg) || exit 1; \
			done; \
		done; \
	done

clean:
	$(GO) clean -testcache
