package main

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/steadystate/steadystate/benchmarks/internal/results"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// sample holds, shortened, one result of every benchmark a target of the
// project's own reads, each meeting its target.
const sample = `goos: linux
goarch: amd64
cpu: Intel(R) Xeon(R) Processor @ 2.50GHz
pkg: github.com/steadystate/steadystate/statedb
BenchmarkReadTxn-2   345948356   3.467 ns/op   0 B/op   0 allocs/op
BenchmarkPropagationDelay-2   30997   33969 ns/op   294384 objects/sec   9.852 p50-us   19.32 p90-us   58.46 p99-us   7328 B/op   131 allocs/op
pkg: github.com/steadystate/steadystate/benchmarks/statedb
BenchmarkWriteTxn/batch=1/impl=statedb-2     10000   4000 ns/op   250000 objects/sec   1000 B/op   8 allocs/op
BenchmarkWriteTxn/batch=1/impl=cilium-2      10000   6000 ns/op   166666 objects/sec   6217 B/op   17 allocs/op
BenchmarkWriteTxn/batch=1/impl=memdb-2       10000   5000 ns/op   200000 objects/sec   1000 B/op   57 allocs/op
BenchmarkWriteTxn/batch=100/impl=statedb-2     661   100000 ns/op   1000000 objects/sec   141075 B/op   1697 allocs/op
BenchmarkWriteTxn/batch=100/impl=memdb-2      1502   250000 ns/op   400000 objects/sec   70055 B/op   1068 allocs/op
BenchmarkLookup/impl=statedb-2   1934   50000 ns/op   20000000 objects/sec   0 B/op   0 allocs/op
BenchmarkLookup/impl=memdb-2      954  500000 ns/op    2000000 objects/sec   78080 B/op   3746 allocs/op
BenchmarkLookup/impl=iradix-2    2646   40000 ns/op   25000000 objects/sec   0 B/op   0 allocs/op
pkg: github.com/steadystate/steadystate/benchmarks/scaling
BenchmarkReconcile/objects=10000/impl=steadystate-2   30   40000000 ns/op   3000 ns/object   333333 objects/sec   5.3 heap-MB   560 heap-B/object
BenchmarkReconcile/objects=1000000/impl=steadystate-2   1   3000000000 ns/op   3100 ns/object   322580 objects/sec   250 heap-MB   262 heap-B/object
pkg: github.com/steadystate/steadystate/examples/routes
BenchmarkApply/impl=reconciler-2   6   200000000 ns/op   0.2 sec/10k   50000 objects/sec
BenchmarkApply/impl=ip-batch-2     8   150000000 ns/op   0.15 sec/10k   66666 objects/sec
BenchmarkRepairDrift-2   1   1300000000 ns/op   25 max-ms   9.2 p50-ms   22 p99-ms
pkg: github.com/steadystate/steadystate/examples/iptables
BenchmarkApply5k/impl=iptables-restore-2   5   190000000 ns/op   0.19 s/5k-rules   26315 rules/sec
BenchmarkApply5k/impl=reconciler-2         5   900000000 ns/op   0.25 s/5k-rules   20000 rules/sec   1.3 x-baseline
BenchmarkRepairDrift-2   1   5300000000 ns/op   77 max-ms   31 p50-ms   77 p99-ms
pkg: github.com/steadystate/steadystate/examples/sysctl
BenchmarkRepairDrift-2   1   30000000000 ns/op   5005 max-ms   2600 p50-ms   5005 p99-ms
pkg: github.com/steadystate/steadystate/reconciler
BenchmarkWorkers/impl=workers-1-2    1   10000000000 ns/op   1000 objects/sec
BenchmarkWorkers/impl=workers-16-2   1   700000000 ns/op   14000 objects/sec
pkg: github.com/steadystate/steadystate/etcd
BenchmarkFleet/agents=100/objects=10000-2   1   33000000000 ns/op   5.9 initial-sync-s   51 p50-apply-ms   90 p99-apply-ms   236 status-writes/s   2.4 status-writes/s/agent
BenchmarkRollout/agents=100/objects=10000-2   1   357000000 ns/op   65 halt-rollback-ms   70 p50-apply-ms   0.30 rollout-budget-ratio   0.36 rollout-s
BenchmarkFleetScale/agents=250/objects=1000-2   1   26000000000 ns/op   1.0 changes/s   1.21 etcd-req/change/agent   1.25 heap-MB/agent   3.0 initial-sync-s   380 max-apply-ms   125 p50-apply-ms   200 p90-apply-ms   380 p99-apply-ms   1.0 status-writes/s/agent   1.0 watch-streams/agent   1.0 watchers/agent
pkg: github.com/steadystate/steadystate/examples/agent
BenchmarkColdStart/routes=10000/rules=2000-2   1   500000000 ns/op   0.30 cold-s   0.35 tools-s   0.86 x-tools   80 vmhwm-MB
BenchmarkColdStart/routes=50000/rules=10000-2   1   2000000000 ns/op   1.5 cold-s   1.6 tools-s   0.94 x-tools   190 vmhwm-MB
BenchmarkRestart/routes=10000/rules=2000-2   1   300000000 ns/op   0.35 cold-s   0.2 restart-s   80 vmhwm-MB
BenchmarkRestart/routes=50000/rules=10000-2   1   2000000000 ns/op   1.5 cold-s   0.9 restart-s   190 vmhwm-MB
BenchmarkEdit/routes=50000/rules=10000-2   20   120000000 ns/op   63 edit-ms   167 edit-max-ms   81 edit-first-ms
BenchmarkRefreshPass/routes=50000/rules=10000-2   20   508000000 ns/op   0.43 refresh-pass-s   0.38 routes-s   0.43 rules-s
PASS
`

// ciliumSample holds rounds rounds of every paired benchmark that a target
// against cilium reads, on every side the targets name, steadystate ahead
// on each by 1.3x: 1300 vs 1000 objects/sec, p50 10 vs 13 us (p90 20 vs
// 26, p99 40 vs 52), 100 vs 130 heap-MB, 400 vs 520 B/op, 7 vs 12
// allocs/op, 1 vs 25 retained bytes per transaction.
func ciliumSample(rounds int) string {
	var b strings.Builder
	b.WriteString("pkg: " + results.PkgCilium + "\n")
	sides := map[string][]string{}
	var groups []string
	for _, t := range results.CiliumTargets() {
		g := t.Subject.Group
		if !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
		if t.Baseline != nil && !slices.Contains(sides[g], t.Baseline.Impl) {
			sides[g] = append(sides[g], t.Baseline.Impl)
		}
	}
	for _, g := range groups {
		for r := range rounds {
			fmt.Fprintf(&b, "%s/round=%d/impl=steadystate-2   100   5000 ns/op   1300 objects/sec   10 p50-us   20 p90-us   40 p99-us   100 heap-MB   1 retained-B/txn   400 B/op   7 allocs/op\n", g, r)
			for _, peer := range sides[g] {
				fmt.Fprintf(&b, "%s/round=%d/impl=%s-2   100   5500 ns/op   1000 objects/sec   13 p50-us   26 p90-us   52 p99-us   130 heap-MB   25 retained-B/txn   520 B/op   12 allocs/op\n", g, r, peer)
			}
		}
	}
	return b.String()
}

func parse(t *testing.T, s string) *results.Set {
	t.Helper()
	set, err := results.Parse(strings.NewReader(s), nil)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// allTargets is the number of targets; every one is met in full.
var allTargets = len(results.Targets)

// full is sample with five rounds of the pairs against cilium.
var full = sample + ciliumSample(5)

func TestReport(t *testing.T) {
	var out bytes.Buffer
	if !report(&out, parse(t, full), true, false) {
		t.Fatalf("report with every target met returned not ok:\n%s", out.String())
	}
	for _, want := range []string{
		"2.50x: statedb 1.00M vs memdb 400.0k objects/sec",
		"10.00x: statedb 20.00M vs memdb 2.00M objects/sec",
		"0.80x: statedb 20.00M vs iradix 25.00M objects/sec",
		"2.12x: statedb 8 vs cilium 17 allocs/op",
		"6.22x: statedb 1000 vs cilium 6217 B/op",
		"1.03x: objects=1000000 3100 vs objects=10000 3000 ns/object",
		"1.33x: reconciler 0.2 vs ip-batch 0.15 sec/10k",
		"1.32x: reconciler 0.25 vs iptables-restore 0.19 s/5k-rules",
		fmt.Sprintf("%d of %d targets met", allTargets, allTargets),
		"ratios: benchmarks/statedb", // the ratio tables
		"results: examples/iptables", // the result tables
		"reconciler end to end",
		"propagation delay",
		"steadystate vs cilium/statedb: benchmarks/cilium", // the pair table
		"1.30x (5 rounds, 1.30-1.30): steadystate 1300 vs cilium 1000 objects/sec",
		"1.30x (5 rounds, 1.30-1.30): steadystate 10 vs cilium 13 p50-us",
		"1.30x (5 rounds, 1.30-1.30): steadystate 100 vs cilium-lean 130 heap-MB",
		"1.71x (5 rounds, 1.71-1.71): steadystate 7 vs cilium 12 allocs/op",
		"1 B/txn",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	for _, want := range [][]string{
		{"BenchmarkPropagationDelay", "cilium", "p50-us", "10", "13", "1.30x", "5", ">= 1.20x"},
		{"BenchmarkPropagationDelay", "cilium", "p90-us", "20", "26", "1.30x", "5", ">= 1.00x"},
		{"BenchmarkWriteTxn/batch=1", "cilium", "p90-us", "20", "26", "1.30x", "5", "-"}, // reported, not a target
		{"BenchmarkAlternate", "cilium", "retained-B/txn", "1", "25", "-", "5", "<= 16 B/txn"},
		{"vs cilium: PropagationDelay p50 latency (cilium/steadystate)", ">= 1.20x", "met"},
	} {
		if !hasLine(out.String(), want) {
			t.Errorf("report lacks a line with %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	report(&out, parse(t, full), true, true)
	if strings.Contains(out.String(), "ratios:") || !strings.Contains(out.String(), fmt.Sprintf("%d of %d targets met", allTargets, allTargets)) {
		t.Errorf("targets-only report:\n%s", out.String())
	}
}

func TestReportMissed(t *testing.T) {
	ss := func(g string, r int) string { return fmt.Sprintf("%s/round=%d/impl=steadystate-2", g, r) }
	tests := []struct {
		name, input string
		want        []string // on one line
		missed      int
	}{
		{"ratio", strings.Replace(full, "2000000 objects/sec", "10000000 objects/sec", 1),
			[]string{"2.00x: statedb 20.00M vs memdb 10.00M objects/sec", "MISSED"}, 1},
		{"allocs", strings.ReplaceAll(full, "1000 B/op   8 allocs/op", "1000 B/op   74 allocs/op"),
			[]string{"0.23x: statedb 74 vs cilium 17 allocs/op", "MISSED"}, 1},
		{"time ratio", strings.ReplaceAll(full, "0.2 sec/10k", "0.3 sec/10k"),
			[]string{"2.00x: reconciler 0.3 vs ip-batch 0.15 sec/10k", "MISSED"}, 1},
		{"missing", strings.ReplaceAll(full, "BenchmarkLookup/impl=iradix", "BenchmarkOther/impl=iradix"),
			[]string{"not in the run: benchmarks/statedb BenchmarkLookup impl=iradix", "MISSING"}, 1},
		{"other package", strings.ReplaceAll(full, "pkg: github.com/steadystate/steadystate/examples/routes", "pkg: other/routes"),
			[]string{"not in the run: examples/routes BenchmarkApply impl=reconciler", "MISSING"}, 2}, // and BenchmarkRepairDrift
		// Three of five rounds slower: the median of the per-round ratios
		// misses.
		{"cilium throughput", strings.NewReplacer(
			ss("BenchmarkChanges", 0)+"   100   5000 ns/op   1300 objects/sec", ss("BenchmarkChanges", 0)+"   100   5000 ns/op   1100 objects/sec",
			ss("BenchmarkChanges", 2)+"   100   5000 ns/op   1300 objects/sec", ss("BenchmarkChanges", 2)+"   100   5000 ns/op   1150 objects/sec",
			ss("BenchmarkChanges", 4)+"   100   5000 ns/op   1300 objects/sec", ss("BenchmarkChanges", 4)+"   100   5000 ns/op   1190 objects/sec",
		).Replace(full),
			[]string{"vs cilium: Changes objects/sec (steadystate/cilium)", "1.19x (5 rounds, 1.10-1.30): steadystate 1190 vs cilium 1000 objects/sec", "MISSED"}, 1},
		// A slower p50 misses each latency target that reads it (the
		// inverse ratio): PropagationDelay's and the two Derive shapes'.
		{"cilium latency", strings.ReplaceAll(full, "objects/sec   10 p50-us", "objects/sec   12 p50-us"),
			[]string{"vs cilium: PropagationDelay p50 latency (cilium/steadystate)", "1.08x (5 rounds, 1.08-1.08): steadystate 12 vs cilium 13 p50-us", "MISSED"}, 1},
		{"retained", strings.ReplaceAll(full, "   1 retained-B/txn", "   3700 retained-B/txn"),
			[]string{"vs cilium: Alternate memory kept per transaction (steadystate)", "3700 B/txn", "MISSED"}, 1},
		{"allocs against cilium", strings.ReplaceAll(full, "400 B/op   7 allocs/op", "400 B/op   13 allocs/op"),
			[]string{"vs cilium: WriteTxn/batch=1 allocs/op (cilium/steadystate)", "0.92x", "MISSED"}, 1},
		// Three rounds are not a median of five.
		{"rounds", sample + ciliumSample(3),
			[]string{"3 paired run(s) of benchmarks/cilium BenchmarkWriteTxn/batch=1 impl=steadystate and benchmarks/cilium BenchmarkWriteTxn/batch=1 impl=cilium, need 5 for a median", "MISSING"},
			len(results.CiliumTargets())}, // only the project's own targets are met
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := parse(t, tt.input)
			var out bytes.Buffer
			if !report(&out, set, false, true) {
				t.Errorf("report without -check returned not ok")
			}
			if report(&bytes.Buffer{}, set, true, true) {
				t.Errorf("report with -check returned ok")
			}
			met := fmt.Sprintf("%d of %d targets met", allTargets-tt.missed, allTargets)
			if !hasLine(out.String(), tt.want) || !strings.Contains(out.String(), met) {
				t.Errorf("report lacks %q or %s:\n%s", tt.want, met, out.String())
			}
		})
	}
}

func TestReportFailedOrEmpty(t *testing.T) {
	if report(&bytes.Buffer{}, parse(t, "PASS\nok x 0.1s\n"), false, false) {
		t.Error("report of an input without results returned ok")
	}
	var out bytes.Buffer
	if report(&out, parse(t, full+"--- FAIL: BenchmarkY\nFAIL\tx\t0.1s\n"), false, false) {
		t.Error("report of a failed run returned ok")
	}
	if !strings.Contains(out.String(), "--- FAIL: BenchmarkY") {
		t.Errorf("report does not list the failure:\n%s", out.String())
	}
}

// hasLine reports whether one line of text holds every part of want.
func hasLine(text string, want []string) bool {
	for _, line := range strings.Split(text, "\n") {
		all := true
		for _, w := range want {
			all = all && strings.Contains(line, w)
		}
		if all {
			return true
		}
	}
	return false
}
