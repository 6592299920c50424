package main

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

// sample is real go test output, shortened, with two runs of each result.
const sample = `goos: linux
goarch: amd64
pkg: github.com/steadystate/steadystate/benchmarks/statedb
cpu: Intel(R) Xeon(R) Processor @ 2.50GHz
BenchmarkWriteTxn/batch=1/impl=statedb-2     	   10000	      4000 ns/op	    250000 objects/sec	   1000 B/op	       8 allocs/op
BenchmarkWriteTxn/batch=1/impl=statedb-2     	   10000	      6000 ns/op	    166666 objects/sec	   1000 B/op	       8 allocs/op
BenchmarkWriteTxn/batch=1/impl=memdb-2       	   10000	      5000 ns/op	    200000 objects/sec	   1000 B/op	      57 allocs/op
BenchmarkWriteTxn/batch=100/impl=statedb-2   	     661	    100000 ns/op	   1000000 objects/sec	  141075 B/op	    1697 allocs/op
BenchmarkWriteTxn/batch=100/impl=memdb-2     	    1502	    250000 ns/op	    400000 objects/sec	   70055 B/op	    1068 allocs/op
BenchmarkWriteTxn/batch=100/impl=iradix-2    	    3162	    100000 ns/op	   1000000 objects/sec	   51671 B/op	     729 allocs/op
BenchmarkLookup/impl=statedb-2               	    1934	     50000 ns/op	  20000000 objects/sec	       0 B/op	       0 allocs/op
BenchmarkLookup/impl=memdb-2                 	     954	    500000 ns/op	   2000000 objects/sec	   78080 B/op	    3746 allocs/op
BenchmarkLookup/impl=iradix-2                	    2646	     40000 ns/op	  25000000 objects/sec	       0 B/op	       0 allocs/op
PASS
ok  	github.com/steadystate/steadystate/benchmarks/statedb	11.734s
`

func TestParse(t *testing.T) {
	in, err := Parse(strings.NewReader(sample), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Failed) != 0 {
		t.Fatalf("Failed = %q, want none", in.Failed)
	}
	if got, want := strings.Join(in.Groups(), ","), "BenchmarkWriteTxn/batch=1,BenchmarkWriteTxn/batch=100,BenchmarkLookup"; got != want {
		t.Fatalf("Groups() = %s, want %s", got, want)
	}
	tests := []struct {
		group, impl, unit string
		want              float64
		runs              int
	}{
		{"BenchmarkWriteTxn/batch=1", "statedb", "ns/op", 5000, 2}, // median of two runs
		{"BenchmarkWriteTxn/batch=1", "statedb", "allocs/op", 8, 2},
		{"BenchmarkWriteTxn/batch=1", "memdb", "objects/sec", 200000, 1},
		{"BenchmarkWriteTxn/batch=100", "iradix", "B/op", 51671, 1},
		{"BenchmarkLookup", "memdb", "objects/sec", 2e6, 1},
	}
	for _, tt := range tests {
		r := in.Find(tt.group, tt.impl)
		if r == nil {
			t.Errorf("no result for %s impl=%s", tt.group, tt.impl)
			continue
		}
		if got, ok := r.Metric(tt.unit); !ok || got != tt.want {
			t.Errorf("%s impl=%s %s = %v (found %v), want %v", tt.group, tt.impl, tt.unit, got, ok, tt.want)
		}
		if r.Runs != tt.runs {
			t.Errorf("%s impl=%s Runs = %d, want %d", tt.group, tt.impl, r.Runs, tt.runs)
		}
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
	tests := []struct{ name, group, impl string }{
		{"BenchmarkLookup/impl=memdb", "BenchmarkLookup", "memdb"},
		{"BenchmarkWriteTxn/batch=100/impl=statedb", "BenchmarkWriteTxn/batch=100", "statedb"},
		{"BenchmarkX/impl=a/size=3", "BenchmarkX/size=3", "a"},
		{"BenchmarkReadTxn", "BenchmarkReadTxn", ""},
	}
	for _, tt := range tests {
		g, i := splitName(tt.name)
		if g != tt.group || i != tt.impl {
			t.Errorf("splitName(%q) = %q, %q; want %q, %q", tt.name, g, i, tt.group, tt.impl)
		}
	}
}

func TestParseFailures(t *testing.T) {
	out := "BenchmarkX-2 10 5 ns/op\n--- FAIL: BenchmarkY\nFAIL\tgithub.com/x/y\t0.1s\nFAIL\tgithub.com/x/z [build failed]\n"
	in, err := Parse(strings.NewReader(out), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Failed) != 3 {
		t.Errorf("Failed = %q, want 3 lines", in.Failed)
	}
	if report(&bytes.Buffer{}, in, false) {
		t.Error("report of a failed run returned ok")
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

func TestReport(t *testing.T) {
	in, err := Parse(strings.NewReader(sample), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if !report(&out, in, true) {
		t.Fatalf("report with every target met returned not ok:\n%s", out.String())
	}
	for _, want := range []string{
		"ok       BenchmarkWriteTxn/batch=100 statedb/memdb >= 1.30x: 2.50x",
		"ok       BenchmarkLookup statedb/memdb >= 3.00x: 10.00x",
		"ok       BenchmarkLookup statedb/iradix >= 0.80x: 0.80x",
		"ok       BenchmarkWriteTxn/batch=1 statedb allocs/op <= 10: 8 allocs/op",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestReportMissed(t *testing.T) {
	tests := []struct {
		name, input, want string
	}{
		{"ratio", strings.Replace(sample, "20000000 objects/sec", "5000000 objects/sec", 1),
			"MISSED   BenchmarkLookup statedb/memdb >= 3.00x: 2.50x"},
		{"allocs", strings.ReplaceAll(sample, "8 allocs/op", "74 allocs/op"),
			"MISSED   BenchmarkWriteTxn/batch=1 statedb allocs/op <= 10: 74 allocs/op"},
		{"missing", strings.ReplaceAll(sample, "BenchmarkLookup/impl=iradix", "BenchmarkOther/impl=iradix"),
			"MISSING  BenchmarkLookup statedb/iradix >= 0.80x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := Parse(strings.NewReader(tt.input), nil)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if report(&out, in, false) != true {
				t.Errorf("report without -check returned not ok")
			}
			if report(&bytes.Buffer{}, in, true) {
				t.Errorf("report with -check returned ok")
			}
			if !strings.Contains(out.String(), tt.want) {
				t.Errorf("report lacks %q:\n%s", tt.want, out.String())
			}
		})
	}
}

func TestReportEmpty(t *testing.T) {
	in, err := Parse(strings.NewReader("PASS\nok x 0.1s\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if report(&bytes.Buffer{}, in, false) {
		t.Error("report of an input without results returned ok")
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
// parser: it must not fail or panic, must find the real results, and
// every metric it returns must be a finite, non-negative number of a named
// group.
func FuzzParse(f *testing.F) {
	f.Add(sample)
	f.Add("BenchmarkX-2 10 5 ns/op 3 objects/sec\n")
	f.Add("BenchmarkX/impl=-2 1 1e308 ns/op\n")
	f.Add("Benchmark 1 1 x\nFAIL\n")
	f.Add(strings.Repeat("a", 70000))
	f.Fuzz(func(t *testing.T, text string) {
		for _, input := range []string{text, sample + text, text + "\n" + sample} {
			in, err := Parse(strings.NewReader(input), nil)
			if err != nil {
				// Only a line longer than the scanner's buffer is an error.
				if !strings.Contains(err.Error(), "too long") {
					t.Fatalf("Parse: %v", err)
				}
				continue
			}
			for _, r := range in.Results {
				if !strings.HasPrefix(r.Group, "Benchmark") || r.Runs < 1 {
					t.Fatalf("bad result %+v", r)
				}
				for unit, v := range r.Metrics {
					if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
						t.Fatalf("%s %s = %v", r.Group, unit, v)
					}
				}
			}
			if input != text && in.Find("BenchmarkLookup", "iradix") == nil {
				t.Fatalf("the sample's results were lost in %q", input)
			}
			report(&bytes.Buffer{}, in, true)
		}
	})
}
