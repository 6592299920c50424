package results

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// sample is real go test output, shortened, of two packages that share
// benchmark names, with two runs of some results and the lines `make bench`
// adds at the top.
const sample = `date: 2026-01-02T03:04:05Z
go-version: go1.26.8
cores: 2
goos: linux
goarch: amd64
pkg: github.com/steadystate/steadystate/statedb
cpu: Intel(R) Xeon(R) Processor @ 2.50GHz
BenchmarkLookup-2   10000   144608 ns/op   6915250 objects/sec   8000 B/op   1000 allocs/op
PASS
ok  	github.com/steadystate/steadystate/statedb	154.427s
goos: linux
goarch: amd64
pkg: github.com/steadystate/steadystate/benchmarks/statedb
cpu: Intel(R) Xeon(R) Processor @ 2.50GHz
BenchmarkWriteTxn/batch=1/impl=statedb-2     	   10000	      4000 ns/op	    250000 objects/sec	   1000 B/op	       8 allocs/op
BenchmarkWriteTxn/batch=1/impl=statedb-2     	   10000	      6000 ns/op	    166666 objects/sec	   1000 B/op	       8 allocs/op
BenchmarkWriteTxn/batch=1/impl=memdb-2       	   10000	      5000 ns/op	    200000 objects/sec	   1000 B/op	      57 allocs/op
BenchmarkWriteTxn/batch=100/impl=iradix-2    	    3162	    100000 ns/op	   1000000 objects/sec	   51671 B/op	     729 allocs/op
BenchmarkLookup/impl=statedb-2               	    1934	     50000 ns/op	  20000000 objects/sec	       0 B/op	       0 allocs/op
BenchmarkLookup/impl=memdb-2                 	     954	    500000 ns/op	   2000000 objects/sec	   78080 B/op	    3746 allocs/op
PASS
ok  	github.com/steadystate/steadystate/benchmarks/statedb	11.734s
`

func TestParse(t *testing.T) {
	s, err := Parse(strings.NewReader(sample), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Failed) != 0 {
		t.Fatalf("Failed = %q, want none", s.Failed)
	}
	if got, want := strings.Join(s.Packages(), ","), PkgStatedb+","+PkgCompare; got != want {
		t.Fatalf("Packages() = %s, want %s", got, want)
	}
	if got, want := strings.Join(s.Groups(PkgCompare), ","), "BenchmarkWriteTxn/batch=1,BenchmarkWriteTxn/batch=100,BenchmarkLookup"; got != want {
		t.Fatalf("Groups() = %s, want %s", got, want)
	}
	for key, want := range map[string]string{"date": "2026-01-02T03:04:05Z", "go-version": "go1.26.8", "cores": "2", "cpu": "Intel(R) Xeon(R) Processor @ 2.50GHz", "goos": "linux"} {
		if got := s.Config[key]; got != want {
			t.Errorf("Config[%s] = %q, want %q", key, got, want)
		}
	}
	if _, ok := s.Config["pkg"]; ok {
		t.Error("pkg is in Config; it belongs to each result")
	}
	tests := []struct {
		pkg, group, impl, unit string
		want                   float64
		runs                   int
	}{
		{PkgCompare, "BenchmarkWriteTxn/batch=1", "statedb", "ns/op", 5000, 2}, // median of two runs
		{PkgCompare, "BenchmarkWriteTxn/batch=1", "statedb", "allocs/op", 8, 2},
		{PkgCompare, "BenchmarkWriteTxn/batch=1", "memdb", "objects/sec", 200000, 1},
		{PkgCompare, "BenchmarkWriteTxn/batch=100", "iradix", "B/op", 51671, 1},
		{PkgCompare, "BenchmarkLookup", "memdb", "objects/sec", 2e6, 1},
		{PkgStatedb, "BenchmarkLookup", "", "objects/sec", 6915250, 1}, // same name, other package
	}
	for _, tt := range tests {
		r := s.Find(tt.pkg, tt.group, tt.impl)
		if r == nil {
			t.Errorf("no result for %s %s impl=%s", tt.pkg, tt.group, tt.impl)
			continue
		}
		if got, ok := r.Metric(tt.unit); !ok || got != tt.want {
			t.Errorf("%s impl=%s %s = %v (found %v), want %v", tt.group, tt.impl, tt.unit, got, ok, tt.want)
		}
		if r.Runs != tt.runs {
			t.Errorf("%s impl=%s Runs = %d, want %d", tt.group, tt.impl, r.Runs, tt.runs)
		}
	}
	if r := s.Find("", "BenchmarkLookup", ""); r == nil || r.Pkg != PkgStatedb {
		t.Errorf("Find in any package = %+v", r)
	}
}

// TestParseRounds: the rounds of a paired benchmark and the -count runs
// of it are all runs of one result, whose metrics are their medians.
func TestParseRounds(t *testing.T) {
	out := "pkg: " + PkgCilium + `
BenchmarkW/batch=1/round=0/impl=steadystate-2   10   100 ns/op   9 p50-us
BenchmarkW/batch=1/round=0/impl=cilium-2        10   300 ns/op
BenchmarkW/batch=1/round=1/impl=cilium-2        10   200 ns/op
BenchmarkW/batch=1/round=1/impl=steadystate-2   10   400 ns/op   1 p50-us
BenchmarkW/batch=1/round=2/impl=steadystate-2   10   200 ns/op   5 p50-us
BenchmarkW/batch=1/round=2/impl=cilium-2        10   100 ns/op
BenchmarkW/batch=1/round=0/impl=steadystate-2   10   300 ns/op   7 p50-us
`
	s, err := Parse(strings.NewReader(out), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Results) != 2 {
		t.Fatalf("%d results, want 2: %+v", len(s.Results), s.Results)
	}
	tests := []struct {
		impl, unit string
		want       float64
		runs       int
	}{
		{"steadystate", "ns/op", 250, 4}, // median of 100, 400, 200, 300
		{"steadystate", "p50-us", 6, 4},  // median of 9, 1, 5, 7
		{"cilium", "ns/op", 200, 3},
	}
	for _, tt := range tests {
		r := s.Find(PkgCilium, "BenchmarkW/batch=1", tt.impl)
		if r == nil {
			t.Fatalf("no result of impl=%s", tt.impl)
		}
		if got, _ := r.Metric(tt.unit); got != tt.want || r.Runs != tt.runs {
			t.Errorf("impl=%s %s = %v over %d runs, want %v over %d", tt.impl, tt.unit, got, r.Runs, tt.want, tt.runs)
		}
	}
}

// TestPairedRatio: a ratio against a peer is the median of the per-round
// ratios, the sides of each round (and of each -count repetition of it)
// paired by their round, whatever the order of the lines. Here the median
// of the ratios (2) differs from the ratio of the medians (300/200).
func TestPairedRatio(t *testing.T) {
	out := "pkg: " + PkgCilium + `
BenchmarkW/round=0/impl=steadystate-2   10   100 objects/sec
BenchmarkW/round=0/impl=cilium-2        10   50 objects/sec
BenchmarkW/round=1/impl=cilium-2        10   200 objects/sec
BenchmarkW/round=1/impl=steadystate-2   10   300 objects/sec
BenchmarkW/round=2/impl=steadystate-2   10   1000 objects/sec
BenchmarkW/round=2/impl=cilium-2        10   250 objects/sec
BenchmarkW/round=0/impl=steadystate-2   10   400 objects/sec
BenchmarkW/round=0/impl=cilium-2        10   400 objects/sec
BenchmarkW/round=1/impl=steadystate-2   10   700 objects/sec
BenchmarkW/round=9/impl=steadystate-2   10   1 objects/sec
`
	s, err := Parse(strings.NewReader(out), nil)
	if err != nil {
		t.Fatal(err)
	}
	subj, base := s.Find(PkgCilium, "BenchmarkW", "steadystate"), s.Find(PkgCilium, "BenchmarkW", "cilium")
	// Pairs: 100/50, 300/200, 1000/250, 400/400; the second round=1 and
	// the round=9 of steadystate have no cilium side.
	mid, lo, hi, n, ok := PairedRatio(subj, base, "objects/sec", false)
	if !ok || n != 4 || mid != 1.75 || lo != 1 || hi != 4 {
		t.Fatalf("PairedRatio = %v, %v, %v, %d, %v; want 1.75, 1, 4, 4, true", mid, lo, hi, n, ok)
	}
	// Inverse: 0.25, 0.5, 0.67, 1.
	if mid, _, _, _, _ := PairedRatio(subj, base, "objects/sec", true); math.Abs(mid-(0.5+2.0/3)/2) > 1e-12 {
		t.Errorf("inverse PairedRatio = %v", mid)
	}
	if _, _, _, _, ok := PairedRatio(subj, base, "ns/op", false); ok {
		t.Error("PairedRatio of a unit neither side reports")
	}
}

func TestParseLine(t *testing.T) {
	tests := []struct {
		line string
		name string // "" when the line is not a result
	}{
		{"BenchmarkX-2 10 5 ns/op", "BenchmarkX"},
		{"BenchmarkX 10 5 ns/op", "BenchmarkX"}, // GOMAXPROCS=1: no suffix
		{"BenchmarkX/batch=10-16 10 5 ns/op 3 objects/sec", "BenchmarkX/batch=10"},
		{"BenchmarkX/a-b-2 10 5 ns/op", "BenchmarkX/a-b"},
		{"BenchmarkX-2 10 5 ns/op 7", ""},        // odd number of fields
		{"BenchmarkX-2 10 five ns/op", ""},       // not a number
		{"BenchmarkX-2 ten 5 ns/op", ""},         // bad iteration count
		{"BenchmarkX-2 0 5 ns/op", ""},           // no iterations
		{"BenchmarkX-2 10 NaN ns/op", ""},        // not a measurement
		{"BenchmarkX-2 10 -5 ns/op", ""},         // negative
		{"BenchmarkX-2 10 +Inf ns/op", ""},       // infinite
		{"    bench_test.go:12: BenchmarkX", ""}, // log output
		{"PASS", ""},
		{"", ""},
	}
	for _, tt := range tests {
		name, _, ok := parseLine(tt.line)
		if ok != (tt.name != "") || name != tt.name {
			t.Errorf("parseLine(%q) = %q, %v; want %q", tt.line, name, ok, tt.name)
		}
	}
}

func TestSplitName(t *testing.T) {
	tests := []struct{ name, group, impl, round string }{
		{"BenchmarkLookup/impl=memdb", "BenchmarkLookup", "memdb", ""},
		{"BenchmarkWriteTxn/batch=100/impl=statedb", "BenchmarkWriteTxn/batch=100", "statedb", ""},
		{"BenchmarkX/impl=a/size=3", "BenchmarkX/size=3", "a", ""},
		{"BenchmarkReadTxn", "BenchmarkReadTxn", "", ""},
		{"BenchmarkX/batch=1/round=2/impl=cilium", "BenchmarkX/batch=1", "cilium", "2"},
		{"BenchmarkX/round=0", "BenchmarkX", "", "0"},
		{"BenchmarkX/round=/impl=a", "BenchmarkX/round=", "a", ""},   // not a round
		{"BenchmarkX/round=x/impl=a", "BenchmarkX/round=x", "a", ""}, // not a round
	}
	for _, tt := range tests {
		g, i, r := splitName(tt.name)
		if g != tt.group || i != tt.impl || r != tt.round {
			t.Errorf("splitName(%q) = %q, %q, %q; want %q, %q, %q", tt.name, g, i, r, tt.group, tt.impl, tt.round)
		}
	}
}

func TestParseFailures(t *testing.T) {
	out := "BenchmarkX-2 10 5 ns/op\n--- FAIL: BenchmarkY\nFAIL\tgithub.com/x/y\t0.1s\nFAIL\tgithub.com/x/z [build failed]\npanic: boom\n"
	s, err := Parse(strings.NewReader(out), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Failed) != 4 {
		t.Errorf("Failed = %q, want 4 lines", s.Failed)
	}
	if tbl, ok := FailedTable(s); !ok || len(tbl.Rows) != 4 {
		t.Errorf("FailedTable = %+v, %v", tbl, ok)
	}
}

func TestParseEcho(t *testing.T) {
	var echo bytes.Buffer
	if _, err := Parse(strings.NewReader(sample), &echo); err != nil {
		t.Fatal(err)
	}
	if echo.String() != sample {
		t.Errorf("echo differs from input:\n%s", echo.String())
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
	}
	for _, tt := range tests {
		if got := median(tt.in); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// FuzzParse feeds arbitrary text, alone and mixed into real output, to the
// parser and to everything built on it: Parse must not fail (but for a line
// too long) or panic, must keep the real results, and every metric must be
// a finite, non-negative number of a named group; the summary tables,
// targets and charts must not panic either.
func FuzzParse(f *testing.F) {
	f.Add(sample)
	f.Add("BenchmarkX-2 10 5 ns/op 3 objects/sec\n")
	f.Add("BenchmarkX/impl=-2 1 1e308 ns/op\n")
	f.Add("pkg: " + PkgScaling + "\nBenchmarkInsert/objects=0/impl=a-2 1 1 ns/object\n")
	f.Add("pkg: " + PkgScaling + "\nBenchmarkReconcile/objects=99999999999999999999-2 1 1 ns/object\n")
	f.Add("Benchmark 1 1 x\nFAIL\n")
	f.Add("pkg: " + PkgCilium + "\nBenchmarkAlternate/round=0/impl=steadystate-2 1 0 p50-us 0 retained-B/txn\n" +
		"BenchmarkAlternate/round=0/impl=cilium-2 1 0 p50-us 0 objects/sec\n")
	f.Add("cores:\npkg:\nx: y: z\n")
	f.Add(strings.Repeat("a", 70000))
	f.Fuzz(func(t *testing.T, text string) {
		for _, input := range []string{text, sample + text, text + "\n" + sample} {
			s, err := Parse(strings.NewReader(input), nil)
			if err != nil {
				// Only a line longer than the scanner's buffer is an error.
				if !strings.Contains(err.Error(), "too long") {
					t.Fatalf("Parse: %v", err)
				}
				continue
			}
			for _, r := range s.Results {
				if !strings.HasPrefix(r.Group, "Benchmark") || r.Runs < 1 {
					t.Fatalf("bad result %+v", r)
				}
				for unit, v := range r.Metrics {
					if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
						t.Fatalf("%s %s = %v", r.Group, unit, v)
					}
				}
			}
			if input != text && s.Find(PkgCompare, "BenchmarkLookup", "memdb") == nil {
				t.Fatalf("the sample's results were lost in %q", input)
			}
			ResultTables(s)
			RatioTables(s)
			ScalingTables(s)
			ReconcileTable(s)
			PropagationTable(s)
			PeerTable(s, PkgCilium, "cilium")
			FloorTable(s)
			MachineTable(s)
			for _, c := range Charts(s) {
				for _, l := range c.Lines {
					for _, p := range l.Points {
						if !(p.X > 0) {
							t.Fatalf("chart %s line %s: size %v", c.File, l.Name, p.X)
						}
					}
				}
			}
			TargetsTable(Evaluate(s, Targets))
		}
	})
}
