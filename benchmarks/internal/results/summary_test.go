package results

import (
	"bytes"
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
const scalingSample = `pkg: github.com/steadystate/steadystate/benchmarks/scaling
BenchmarkInsert/objects=1000/impl=statedb-2     1000  600000 ns/op  600 ns/object  1666666 objects/sec
BenchmarkInsert/objects=1000/impl=memdb-2       1000  900000 ns/op  900 ns/object  1111111 objects/sec
BenchmarkInsert/objects=10000/impl=statedb-2     100 8000000 ns/op  800 ns/object  1250000 objects/sec
BenchmarkReconcile/objects=10000-2   30  40000000 ns/op  4000 ns/object  250000 objects/sec  5.3 heap-MB  560 heap-B/object
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
	if got := charts[0].Lines[0]; got.Name != "statedb" || len(got.Points) != 2 || got.Points[1] != (Point{10000, 800}) {
		t.Errorf("statedb insert line = %+v", got)
	}
	if got := charts[1].Lines[0].Name; got != "reconciler" {
		t.Errorf("reconcile line name = %q", got)
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
