package results

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestFormat(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0"}, {0.07874, "0.0787"}, {0.5, "0.5"}, {8, "8"}, {3.467, "3.47"}, {19.32, "19.3"}, {144.6, "145"},
		{9999, "9999"}, {979638, "979.6k"}, {1264370, "1.26M"}, {2.5e9, "2.50G"},
	}
	for _, tt := range tests {
		if got := Format(tt.in); got != tt.want {
			t.Errorf("Format(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
	for n, want := range map[float64]string{1000: "1k", 10000: "10k", 1e6: "1M", 2500: "2500", 7: "7"} {
		if got := SizeLabel(n); got != want {
			t.Errorf("SizeLabel(%v) = %q, want %q", n, got, want)
		}
	}
	if got := ShortPkg(PkgCompare); got != "benchmarks/statedb" {
		t.Errorf("ShortPkg = %q", got)
	}
}

func TestWriteMarkdown(t *testing.T) {
	var b bytes.Buffer
	tbl := Table{Title: "t", Note: "n", Header: []string{"a", "b"}, Rows: [][]string{{"x|y", "1"}}}
	if err := tbl.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	want := "#### t\n\nn\n\n| a | b |\n| :--- | ---: |\n| x\\|y | 1 |\n\n"
	if b.String() != want {
		t.Errorf("WriteMarkdown =\n%q\nwant\n%q", b.String(), want)
	}
}

// scalingSample is go test output of benchmarks/scaling, shortened.
const scalingSample = `cilium-statedb: v0.9.4
pkg: github.com/steadystate/steadystate/benchmarks/scaling
BenchmarkInsert/objects=1000/impl=statedb-2     1000  600000 ns/op  600 ns/object  1666666 objects/sec
BenchmarkInsert/objects=1000/impl=memdb-2       1000  900000 ns/op  900 ns/object  1111111 objects/sec
BenchmarkInsert/objects=10000/impl=statedb-2     100 8000000 ns/op  800 ns/object  1250000 objects/sec
BenchmarkReconcile/objects=10000/impl=steadystate-2   30  40000000 ns/op  4000 ns/object  250000 objects/sec  5.3 heap-MB  560 heap-B/object
BenchmarkReconcile/objects=10000/impl=cilium-lean-2   30  40000000 ns/op  5000 ns/object  200000 objects/sec  6.3 heap-MB  660 heap-B/object
BenchmarkPropagation/load=heavy-2   100  4000000 ns/op  3000 p50-us  20000 p90-us  90000 p99-us  250 objects/sec  400000 load-objects/sec
`

func TestSummaryTables(t *testing.T) {
	s, err := Parse(strings.NewReader(scalingSample+sample), nil)
	if err != nil {
		t.Fatal(err)
	}
	charts := Charts(s)
	if len(charts) != 3 || charts[0].File != "insert.svg" || len(charts[0].Lines) != 2 {
		t.Fatalf("Charts = %+v", charts)
	}
	if got := charts[0].Lines[0]; got.Name != "steadystate" || len(got.Points) != 2 || got.Points[1] != (Point{10000, 800}) {
		t.Errorf("steadystate insert line = %+v", got)
	}
	if got := charts[1].Lines; len(got) != 2 || got[0].Name != "steadystate" || got[1].Name != "cilium/statedb v0.9.4 (lean)" {
		t.Errorf("reconcile lines = %+v", got)
	}

	var text bytes.Buffer
	for _, tbl := range ScalingTables(s) {
		tbl.WriteText(&text)
	}
	for _, tbl := range RatioTables(s) {
		tbl.WriteText(&text)
	}
	rt, _ := ReconcileTable(s)
	rt.WriteText(&text)
	pt, _ := PropagationTable(s)
	pt.WriteText(&text)
	MachineTable(s).WriteText(&text)
	for _, want := range [][]string{
		{"1k ns/object", "10k ns/object"},
		{"BenchmarkInsert/objects=1000", "statedb", "1.50x"}, // 1.67M / 1.11M objects/sec
		{"BenchmarkWriteTxn/batch=1", "statedb", "1.04x"},    // medians: 208.3k / 200k
		{"BenchmarkLookup", "statedb", "10.00x"},
		{"10k", "250.0k", "4000", "5.30", "560"},
		{"benchmarks/scaling BenchmarkPropagation/load=heavy", "3000", "20.0k", "90.0k"},
		{"Go", "go1.26.8"},
	} {
		if !hasLine(text.String(), want) {
			t.Errorf("tables lack a line with %q:\n%s", want, text.String())
		}
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

// pairSample is go test output of benchmarks/cilium, shortened: five
// rounds of three benchmarks, one of them with two cilium sides.
const pairSample = `pkg: github.com/steadystate/steadystate/benchmarks/cilium
BenchmarkDerive/load=heavy/round=0/impl=steadystate-2   100  4000000 ns/op  3000 p50-us  20000 p90-us  90000 p99-us  250 objects/sec  400000 load-objects/sec
BenchmarkDerive/load=heavy/round=0/impl=cilium-2        100  4000000 ns/op  6000 p50-us  10000 p90-us  90000 p99-us  200 objects/sec  200000 load-objects/sec
BenchmarkDerive/load=heavy/round=1/impl=cilium-2        100  4000000 ns/op  6000 p50-us  10000 p90-us  90000 p99-us  200 objects/sec  200000 load-objects/sec
BenchmarkDerive/load=heavy/round=1/impl=steadystate-2   100  4000000 ns/op  3000 p50-us  20000 p90-us  90000 p99-us  250 objects/sec  400000 load-objects/sec
BenchmarkDerive/load=heavy/round=2/impl=steadystate-2   100  4000000 ns/op  3000 p50-us  20000 p90-us  90000 p99-us  250 objects/sec  400000 load-objects/sec
BenchmarkDerive/load=heavy/round=2/impl=cilium-2        100  4000000 ns/op  6000 p50-us  10000 p90-us  90000 p99-us  200 objects/sec  200000 load-objects/sec
BenchmarkDerive/load=heavy/round=3/impl=cilium-2        100  4000000 ns/op  6000 p50-us  10000 p90-us  90000 p99-us  200 objects/sec  200000 load-objects/sec
BenchmarkDerive/load=heavy/round=3/impl=steadystate-2   100  4000000 ns/op  3000 p50-us  20000 p90-us  90000 p99-us  250 objects/sec  400000 load-objects/sec
BenchmarkDerive/load=heavy/round=4/impl=steadystate-2   100  4000000 ns/op  3000 p50-us  20000 p90-us  90000 p99-us  250 objects/sec  400000 load-objects/sec
BenchmarkDerive/load=heavy/round=4/impl=cilium-2        100  4000000 ns/op  6000 p50-us  10000 p90-us  90000 p99-us  200 objects/sec  200000 load-objects/sec
BenchmarkAlternate/round=0/impl=steadystate-2   1000  9000 ns/op  1100000 objects/sec  0 retained-B/txn
BenchmarkAlternate/round=0/impl=cilium-2        1000  9000 ns/op  1000000 objects/sec  20 retained-B/txn
BenchmarkAlternate/round=1/impl=cilium-2        1000  9000 ns/op  1000000 objects/sec  20 retained-B/txn
BenchmarkAlternate/round=1/impl=steadystate-2   1000  9000 ns/op  1100000 objects/sec  0 retained-B/txn
BenchmarkAlternate/round=2/impl=steadystate-2   1000  9000 ns/op  1100000 objects/sec  0 retained-B/txn
BenchmarkAlternate/round=2/impl=cilium-2        1000  9000 ns/op  1000000 objects/sec  20 retained-B/txn
BenchmarkAlternate/round=3/impl=cilium-2        1000  9000 ns/op  1000000 objects/sec  20 retained-B/txn
BenchmarkAlternate/round=3/impl=steadystate-2   1000  9000 ns/op  1100000 objects/sec  0 retained-B/txn
BenchmarkAlternate/round=4/impl=steadystate-2   1000  9000 ns/op  1100000 objects/sec  0 retained-B/txn
BenchmarkAlternate/round=4/impl=cilium-2        1000  9000 ns/op  1000000 objects/sec  20 retained-B/txn
BenchmarkReconcile/objects=1000000/round=0/impl=steadystate-2   1  1000000000 ns/op  300000 objects/sec  100 heap-MB
BenchmarkReconcile/objects=1000000/round=0/impl=cilium-2   1  1000000000 ns/op  100000 objects/sec  300 heap-MB
BenchmarkReconcile/objects=1000000/round=0/impl=cilium-lean-2   1  1000000000 ns/op  200000 objects/sec  200 heap-MB
BenchmarkReconcile/objects=1000000/round=1/impl=steadystate-2   1  1000000000 ns/op  300000 objects/sec  100 heap-MB
BenchmarkReconcile/objects=1000000/round=1/impl=cilium-2   1  1000000000 ns/op  100000 objects/sec  300 heap-MB
BenchmarkReconcile/objects=1000000/round=1/impl=cilium-lean-2   1  1000000000 ns/op  200000 objects/sec  200 heap-MB
BenchmarkReconcile/objects=1000000/round=2/impl=steadystate-2   1  1000000000 ns/op  300000 objects/sec  100 heap-MB
BenchmarkReconcile/objects=1000000/round=2/impl=cilium-2   1  1000000000 ns/op  100000 objects/sec  300 heap-MB
BenchmarkReconcile/objects=1000000/round=2/impl=cilium-lean-2   1  1000000000 ns/op  200000 objects/sec  200 heap-MB
BenchmarkReconcile/objects=1000000/round=3/impl=steadystate-2   1  1000000000 ns/op  300000 objects/sec  100 heap-MB
BenchmarkReconcile/objects=1000000/round=3/impl=cilium-2   1  1000000000 ns/op  100000 objects/sec  300 heap-MB
BenchmarkReconcile/objects=1000000/round=3/impl=cilium-lean-2   1  1000000000 ns/op  200000 objects/sec  200 heap-MB
BenchmarkReconcile/objects=1000000/round=4/impl=steadystate-2   1  1000000000 ns/op  300000 objects/sec  100 heap-MB
BenchmarkReconcile/objects=1000000/round=4/impl=cilium-2   1  1000000000 ns/op  100000 objects/sec  300 heap-MB
BenchmarkReconcile/objects=1000000/round=4/impl=cilium-lean-2   1  1000000000 ns/op  200000 objects/sec  200 heap-MB
BenchmarkOnlyOne/round=0/impl=steadystate-2     1000  9000 ns/op  1100000 objects/sec
`

func TestPeerTable(t *testing.T) {
	s, err := Parse(strings.NewReader(pairSample), nil)
	if err != nil {
		t.Fatal(err)
	}
	tbl, ok := PeerTable(s, PkgCilium, "cilium")
	if !ok {
		t.Fatal("no peer table")
	}
	var text bytes.Buffer
	tbl.WriteText(&text)
	for _, want := range [][]string{
		{"steadystate vs cilium: benchmarks/cilium"},
		{"latencies (p50/p90/p99 us), heap-MB, B/op and allocs/op are peer / steadystate"},
		{"BenchmarkDerive/load=heavy", "cilium", "objects/sec", "250", "200", "1.25x", "1.25-1.25", "5", ">= 1.20x"},
		{"BenchmarkDerive/load=heavy", "cilium", "load-objects/sec", "400.0k", "200.0k", "2.00x", "5", "-"},
		{"BenchmarkDerive/load=heavy", "cilium", "p50-us", "3000", "6000", "2.00x", "5", ">= 1.00x"},
		{"BenchmarkDerive/load=heavy", "cilium", "p90-us", "20.0k", "10.0k", "0.50x", "5", ">= 1.00x"},
		{"BenchmarkAlternate", "cilium", "retained-B/txn", "0", "20", "-", "5", "<= 16 B/txn"},
		{"BenchmarkReconcile/objects=1000000", "cilium", "objects/sec", "300.0k", "100.0k", "3.00x", "5", ">= 1.20x"},
		{"BenchmarkReconcile/objects=1000000", "cilium-lean", "objects/sec", "300.0k", "200.0k", "1.50x", "5", ">= 1.20x"},
		{"BenchmarkReconcile/objects=1000000", "cilium-lean", "heap-MB", "100", "200", "2.00x", "5", ">= 1.20x"},
	} {
		if !hasLine(text.String(), want) {
			t.Errorf("peer table lacks a line with %q:\n%s", want, text.String())
		}
	}
	if strings.Contains(text.String(), "BenchmarkOnlyOne") {
		t.Errorf("peer table shows a benchmark without a cilium side:\n%s", text.String())
	}
	if _, ok := PeerTable(s, PkgScaling, "cilium"); ok {
		t.Error("peer table of a package without pairs")
	}
}

func TestEvaluateInverseAndRuns(t *testing.T) {
	s, err := Parse(strings.NewReader(pairSample), nil)
	if err != nil {
		t.Fatal(err)
	}
	subj := Ref{PkgCilium, "BenchmarkDerive/load=heavy", "steadystate"}
	base := &Ref{PkgCilium, "BenchmarkDerive/load=heavy", "cilium"}
	tests := []struct {
		target Target
		status Status
		value  float64
	}{
		{Target{Subject: subj, Baseline: base, Metrics: []string{"p50-us"}, Inverse: true, Limit: 1.2, Unit: "x", MinRuns: 5}, Met, 2},
		{Target{Subject: subj, Baseline: base, Metrics: []string{"p50-us"}, Limit: 1.2, Unit: "x"}, Missed, 0.5},
		{Target{Subject: subj, Baseline: base, Metrics: []string{"p50-us"}, Inverse: true, Limit: 1.2, Unit: "x", MinRuns: 6}, Missing, 0},
		{Target{Subject: Ref{PkgCilium, "BenchmarkOnlyOne", "steadystate"}, Metrics: []string{"objects/sec"}, MinRuns: 3}, Missing, 0},
		{Target{Subject: subj, Baseline: base, Metrics: []string{"B/op"}, AtMost: true, Limit: 1, Unit: "x"}, Missing, 0},
	}
	for i, tt := range tests {
		o := Evaluate(s, []Target{tt.target})[0]
		if o.Status != tt.status || o.Value != tt.value {
			t.Errorf("%d: %v %v (%s), want %v %v", i, o.Status, o.Value, o.Figures, tt.status, tt.value)
		}
	}
}

// TestCiliumTargets: every paired shape has a throughput target against
// every cilium side, at 1.2x, each needing the median of 5 rounds; the
// latency, heap and cost targets are where the issue puts them.
func TestCiliumTargets(t *testing.T) {
	ts := CiliumTargets()
	byName := map[string]Target{}
	for _, tg := range ts {
		if tg.MinRuns != 5 || tg.Subject.Pkg != PkgCilium || tg.Subject.Impl != "steadystate" {
			t.Errorf("target %q: %+v", tg.Name, tg)
		}
		byName[tg.Name] = tg
	}
	for _, shape := range ciliumShapes {
		name := strings.TrimPrefix(shape.group, "Benchmark")
		tg, ok := byName["vs cilium: "+name+" objects/sec (steadystate/cilium)"]
		if !ok || tg.Limit != 1.2 || tg.Inverse || tg.AtMost || tg.Baseline.Impl != "cilium" {
			t.Errorf("%s: throughput target %+v", shape.group, tg)
		}
	}
	for name, limit := range map[string]float64{
		"vs cilium: PropagationDelay p50 latency (cilium/steadystate)":                    1.2,
		"vs cilium: PropagationDelay p99 latency (cilium/steadystate)":                    1.2,
		"vs cilium: PropagationDelay p90 latency (cilium/steadystate)":                    1.0,
		"vs cilium: Derive/load=light p99 latency (cilium/steadystate)":                   1.0,
		"vs cilium-lean: Reconcile/objects=1000000 objects/sec (steadystate/cilium-lean)": 1.2,
		"vs cilium-lean: Reconcile/objects=1000000 heap in use (cilium-lean/steadystate)": 1.2,
		"vs cilium: WriteTxn/batch=1 B/op (cilium/steadystate)":                           1,
		"vs cilium: WriteTxn/batch=1 allocs/op (cilium/steadystate)":                      1,
	} {
		if tg, ok := byName[name]; !ok || tg.Limit != limit {
			t.Errorf("target %q: %+v", name, tg)
		}
	}
	if !slices.ContainsFunc(Targets, func(tg Target) bool { return tg.Name == ts[0].Name }) {
		t.Error("Targets lacks the targets against cilium")
	}
}
