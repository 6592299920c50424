package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/steadystate/steadystate/benchmarks/internal/results"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// sample is go test output of benchmarks/scaling, shortened.
const sample = `goos: linux
pkg: github.com/steadystate/steadystate/benchmarks/scaling
BenchmarkInsert/objects=1000/impl=statedb-2     1000  600000 ns/op  600 ns/object  1666666 objects/sec
BenchmarkInsert/objects=1000/impl=map-2        20000   40000 ns/op   40 ns/object 25000000 objects/sec
BenchmarkInsert/objects=1000000/impl=statedb-2     1 1500000000 ns/op 1500 ns/object 666666 objects/sec
BenchmarkInsert/objects=1000000/impl=map-2         1  120000000 ns/op  120 ns/object 8333333 objects/sec
BenchmarkInsert/objects=10000/impl=statedb-2     100 8000000 ns/op  800 ns/object  1250000 objects/sec
BenchmarkReconcile/objects=10000/impl=steadystate-2   30  40000000 ns/op  4000 ns/object  250000 objects/sec  5.3 heap-MB  560 heap-B/object
BenchmarkReconcile/objects=100000/impl=steadystate-2   3 300000000 ns/op  3000 ns/object  333333 objects/sec   45 heap-MB  470 heap-B/object
`

// svgDoc is the part of an SVG that the tests look at.
type svgDoc struct {
	XMLName   xml.Name `xml:"svg"`
	Polylines []struct {
		Points string `xml:"points,attr"`
	} `xml:"polyline"`
	Circles []struct {
		Title string `xml:"title"`
	} `xml:"circle"`
	Texts []string `xml:"text"`
}

func render(t *testing.T, c results.Chart) svgDoc {
	t.Helper()
	var buf bytes.Buffer
	if err := Render(&buf, c); err != nil {
		t.Fatal(err)
	}
	var doc svgDoc
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("not well-formed XML: %v\n%s", err, buf.String())
	}
	return doc
}

func parsePoints(t *testing.T, s string) [][2]float64 {
	t.Helper()
	var pts [][2]float64
	for _, f := range strings.Fields(s) {
		x, y, ok := strings.Cut(f, ",")
		if !ok {
			t.Fatalf("bad point %q", f)
		}
		xv, err1 := strconv.ParseFloat(x, 64)
		yv, err2 := strconv.ParseFloat(y, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("bad point %q", f)
		}
		pts = append(pts, [2]float64{xv, yv})
	}
	return pts
}

func TestRenderCharts(t *testing.T) {
	set, err := results.Parse(strings.NewReader(sample), nil)
	if err != nil {
		t.Fatal(err)
	}
	charts := results.Charts(set)
	files := map[string]results.Chart{}
	for _, c := range charts {
		files[c.File] = c
	}
	for _, want := range []string{"insert.svg", "reconcile.svg", "reconcile-heap.svg"} {
		if _, ok := files[want]; !ok {
			t.Fatalf("no chart %s among %v", want, charts)
		}
	}
	ins := render(t, files["insert.svg"])
	if len(ins.Polylines) != 2 || len(ins.Circles) != 5 {
		t.Fatalf("insert: %d lines, %d points; want 2, 5", len(ins.Polylines), len(ins.Circles))
	}
	// statedb: 1k, 10k, 1M in that order (sorted by size), equal decades
	// equally far apart on the log axis, and higher cost drawn higher up.
	pts := parsePoints(t, ins.Polylines[0].Points)
	if len(pts) != 3 {
		t.Fatalf("statedb line has %d points, want 3", len(pts))
	}
	if d1, d2 := pts[1][0]-pts[0][0], pts[2][0]-pts[1][0]; math.Abs(2*d1-d2) > 0.2 {
		t.Errorf("x of 1k, 10k, 1M = %v: not a log scale", pts)
	}
	if !(pts[0][1] > pts[1][1] && pts[1][1] > pts[2][1]) {
		t.Errorf("y of 600, 800, 1500 ns = %v: not increasing upwards", pts)
	}
	text := strings.Join(ins.Texts, "|")
	for _, want := range []string{"insert: cost per object", "1k", "1M", "steadystate", "map", "ns/object (log scale)"} {
		if !strings.Contains(text, want) {
			t.Errorf("insert chart lacks text %q: %s", want, text)
		}
	}
	if got := ins.Circles[0].Title; got != "steadystate at 1k: 600 ns/object" {
		t.Errorf("tooltip = %q", got)
	}
	heap := render(t, files["reconcile-heap.svg"])
	if len(heap.Polylines) != 1 || !strings.Contains(strings.Join(heap.Texts, "|"), "steadystate") {
		t.Errorf("reconcile-heap: %+v", heap)
	}
}

func TestRenderErrors(t *testing.T) {
	for _, c := range []results.Chart{
		{Title: "empty"},
		{Title: "zero size", Lines: []results.Line{{Name: "a", Points: []results.Point{{X: 0, Y: 1}}}}},
		{Title: "nan", Lines: []results.Line{{Name: "a", Points: []results.Point{{X: 1, Y: math.NaN()}}}}},
	} {
		if err := Render(io.Discard, c); err == nil {
			t.Errorf("Render(%s) succeeded", c.Title)
		}
	}
}

func TestRenderDegenerate(t *testing.T) {
	// One point, a zero value, names that need escaping: still valid SVG.
	doc := render(t, results.Chart{Title: "a <b> & c", Metric: "x", Lines: []results.Line{
		{Name: "<one>", Points: []results.Point{{X: 1000, Y: 0}}},
		{Name: "two", Points: []results.Point{{X: 1000, Y: 0}, {X: 1000000, Y: 0}}},
	}})
	if len(doc.Polylines) != 2 {
		t.Fatalf("%d lines, want 2", len(doc.Polylines))
	}
}

func TestAxes(t *testing.T) {
	lin := valueAxis([]float64{12, 47})
	if lin.log || lin.min != 0 || lin.max != 50 {
		t.Errorf("valueAxis(12, 47) = %+v, want linear 0..50", lin)
	}
	if got := lin.ticks(); len(got) != 6 || got[5] != 50 {
		t.Errorf("ticks = %v, want 0, 10, ..., 50", got)
	}
	lg := valueAxis([]float64{20, 1500})
	if !lg.log || lg.min != 10 || lg.max != 10000 || len(lg.ticks()) != 4 {
		t.Errorf("valueAxis(20, 1500) = %+v ticks %v, want log 10..10000", lg, lg.ticks())
	}
	x := sizeAxis([]float64{1000, 1000000})
	if x.min != 1000 || x.max != 1000000 || x.frac(10000) != 1.0/3 {
		t.Errorf("sizeAxis = %+v, frac(10k) = %v", x, x.frac(10000))
	}
	for _, tt := range []struct{ in, want float64 }{{0.7, 1}, {1, 1}, {1.3, 2}, {3, 5}, {7, 10}, {240, 500}} {
		if got := niceStep(tt.in); got != tt.want {
			t.Errorf("niceStep(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "latest.txt")
	if err := os.WriteFile(in, []byte(sample), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(in, filepath.Join(dir, "plots")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "plots", "insert.svg")); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.txt")
	if err := os.WriteFile(empty, []byte("PASS\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(empty, dir); err == nil {
		t.Error("run on a file without scaling results succeeded")
	}
}

// pairSample holds the propagation pairs of benchmarks/cilium, shortened.
const pairSample = `cilium-statedb: v0.9.4
pkg: github.com/steadystate/steadystate/benchmarks/cilium
BenchmarkPropagationDelay/round=0/impl=steadystate-2   1000  30000 ns/op  5 p50-us  8 p90-us  40 p99-us
BenchmarkPropagationDelay/round=0/impl=cilium-2        1000  40000 ns/op  7 p50-us  12 p90-us  60 p99-us
BenchmarkDerive/load=light/round=0/impl=steadystate-2  1000  30000 ns/op  4 p50-us  9 p90-us  35 p99-us
BenchmarkDerive/load=light/round=0/impl=cilium-2       1000  40000 ns/op  6 p50-us  14 p90-us  45 p99-us
`

// barDoc is the part of a bar chart that the tests look at.
type barDoc struct {
	Rects []struct {
		Height string `xml:"height,attr"`
		Title  string `xml:"title"`
	} `xml:"rect"`
	Texts []string `xml:"text"`
}

// TestRenderBars: the propagation chart puts both sides' percentiles on
// one axis, a bar per side and figure, taller for a slower figure, with
// the legends naming steadystate and cilium/statedb with its version.
func TestRenderBars(t *testing.T) {
	set, err := results.Parse(strings.NewReader(pairSample), nil)
	if err != nil {
		t.Fatal(err)
	}
	bars := results.BarCharts(set)
	if len(bars) != 1 || bars[0].File != "propagation.svg" || len(bars[0].Series) != 2 {
		t.Fatalf("BarCharts = %+v", bars)
	}
	var buf bytes.Buffer
	if err := RenderBars(&buf, bars[0]); err != nil {
		t.Fatal(err)
	}
	var doc barDoc
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("not well-formed XML: %v\n%s", err, buf.String())
	}
	heights := map[string]float64{}
	for _, r := range doc.Rects {
		if r.Title != "" {
			h, err := strconv.ParseFloat(r.Height, 64)
			if err != nil {
				t.Fatal(err)
			}
			heights[r.Title] = h
		}
	}
	if len(heights) != 12 {
		t.Fatalf("%d bars, want 12: %v", len(heights), heights)
	}
	ss, ci := heights["steadystate, round trip p99: 40 us"], heights["cilium/statedb v0.9.4, round trip p99: 60 us"]
	if !(ss > 0 && ci > ss) {
		t.Errorf("p99 bars %v (steadystate) and %v (cilium): want cilium's taller", ss, ci)
	}
	text := strings.Join(doc.Texts, "|")
	for _, want := range []string{"steadystate", "cilium/statedb v0.9.4", "round trip p50", "derive p99", "us"} {
		if !strings.Contains(text, want) {
			t.Errorf("bar chart lacks text %q: %s", want, text)
		}
	}
	if err := RenderBars(&bytes.Buffer{}, results.BarChart{Title: "x", Groups: []string{"a"}, Series: []results.Series{{Name: "s", Values: []float64{1, 2}}}}); err == nil {
		t.Error("RenderBars accepted a series with more values than groups")
	}
}
