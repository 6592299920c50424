package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/steadystate/steadystate/benchmarks/internal/results"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const sample = `cpu-model: Intel(R) Xeon(R) Processor @ 2.50GHz
cores: 2
pkg: github.com/steadystate/steadystate/benchmarks/statedb
BenchmarkLookup/impl=statedb-2   1934   50000 ns/op   20000000 objects/sec   0 B/op   0 allocs/op
BenchmarkLookup/impl=memdb-2      954  500000 ns/op    2000000 objects/sec   78080 B/op   3746 allocs/op
pkg: github.com/steadystate/steadystate/benchmarks/scaling
BenchmarkInsert/objects=1000/impl=statedb-2     1000  600000 ns/op  600 ns/object  1666666 objects/sec
BenchmarkInsert/objects=10000/impl=statedb-2     100 8000000 ns/op  800 ns/object  1250000 objects/sec
pkg: github.com/steadystate/steadystate/benchmarks/cilium
BenchmarkPropagationDelay/round=0/impl=steadystate-2   1000  30000 ns/op  330000 objects/sec  16 p50-us  25 p90-us  40 p99-us
BenchmarkPropagationDelay/round=0/impl=cilium-2        1000  40000 ns/op  250000 objects/sec  24 p50-us  30 p90-us  50 p99-us
BenchmarkPropagationDelay/round=1/impl=cilium-2        1000  40000 ns/op  250000 objects/sec  20 p50-us  30 p90-us  50 p99-us
BenchmarkPropagationDelay/round=1/impl=steadystate-2   1000  30000 ns/op  330000 objects/sec  16 p50-us  25 p90-us  40 p99-us
BenchmarkPropagationDelay/round=2/impl=steadystate-2   1000  30000 ns/op  330000 objects/sec  15 p50-us  25 p90-us  40 p99-us
BenchmarkPropagationDelay/round=2/impl=cilium-2        1000  40000 ns/op  250000 objects/sec  20 p50-us  30 p90-us  50 p99-us
BenchmarkPropagationDelay/round=3/impl=cilium-2        1000  40000 ns/op  250000 objects/sec  20 p50-us  30 p90-us  50 p99-us
BenchmarkPropagationDelay/round=3/impl=steadystate-2   1000  30000 ns/op  330000 objects/sec  16 p50-us  25 p90-us  40 p99-us
BenchmarkPropagationDelay/round=4/impl=steadystate-2   1000  30000 ns/op  330000 objects/sec  16 p50-us  25 p90-us  40 p99-us
BenchmarkPropagationDelay/round=4/impl=cilium-2        1000  40000 ns/op  250000 objects/sec  20 p50-us  30 p90-us  50 p99-us
BenchmarkFloor/op=roundtrip-2   1000000   1000 ns/op   2 p50-us   3 p90-us   4 p99-us
`

func TestReplaceSection(t *testing.T) {
	doc := "# Title\n\nhand-written\n\n" + beginMarker + "\nold\n" + endMarker + "\n\n## After\n"
	got, err := replaceSection(doc, "new\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "# Title\n\nhand-written\n\n" + beginMarker + "\n\nnew\n\n" + endMarker + "\n\n## After\n"
	if got != want {
		t.Errorf("replaceSection =\n%s\nwant\n%s", got, want)
	}
	again, err := replaceSection(got, "new\n")
	if err != nil || again != got {
		t.Errorf("replacing again changed the document: %v\n%s", err, again)
	}
	for _, bad := range []string{"no markers", beginMarker + " no end", endMarker + " " + beginMarker} {
		if _, err := replaceSection(bad, "x"); err == nil {
			t.Errorf("replaceSection(%q) succeeded", bad)
		}
	}
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	in, doc := filepath.Join(dir, "latest.txt"), filepath.Join(dir, "BENCHMARKS.md")
	if err := os.WriteFile(in, []byte(sample), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(doc, []byte("intro\n"+beginMarker+"\n"+endMarker+"\noutro\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(in, doc, "benchmarks/plots"); err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"intro\n", "\noutro\n",
		"| CPU | Intel(R) Xeon(R) Processor @ 2.50GHz |", "| what | value |",
		fmt.Sprintf("**5 of %d headline targets met.**", len(results.Targets)),
		"| statedb lookup vs go-memdb (objects/sec) | >= 3.00x | 10.00x: statedb 20.00M vs memdb 2.00M objects/sec | met |",
		"| steadystate | 600 | 800 |",
		"![insert: cost per object](benchmarks/plots/insert.svg)",
		"| BenchmarkLookup | statedb | 10.00x |",
		"### Against cilium/statedb",
		// medians over the rounds: p50 16 vs 20 us; per round 24/16,
		// 20/16, 20/15, 20/16, 20/16
		"| BenchmarkPropagationDelay | cilium | p50-us | 16 | 20 | 1.25x | 1.25-1.50 | 5 | >= 1.20x |",
		"| BenchmarkPropagationDelay | cilium | p99-us | 40 | 50 | 1.25x | 1.25-1.25 | 5 | >= 1.20x |",
		"| vs cilium: PropagationDelay p50 latency (cilium/steadystate) | >= 1.20x | 1.25x (5 rounds, 1.25-1.50): steadystate 16 vs cilium 20 p50-us | met |",
		"### Against the floor",
		"| propagation round trip, p50 (PropagationDelay) | p50-us | 2 | 16 | 8.0x | 20 | 10.0x |",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("document lacks %q:\n%s", want, out)
		}
	}
	if err := os.WriteFile(in, []byte("PASS\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(in, doc, "p"); err == nil {
		t.Error("run on a results file without results succeeded")
	}
}
