package results

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Point is one measurement of a scaling series: Y at X objects.
type Point struct{ X, Y float64 }

// Line is one implementation's series.
type Line struct {
	Name   string
	Points []Point // by increasing X
}

// Chart is a scaling figure against table size: one line per
// implementation. cmd/plot draws it to File; cmd/report embeds that file.
type Chart struct {
	File   string // base name of the SVG, e.g. "insert.svg"
	Title  string
	Note   string // what the figure measures, for the tables
	Metric string // the unit on the y axis
	Lines  []Line
}

// Sizes returns the distinct X values of c's lines, ascending.
func (c Chart) Sizes() []float64 {
	var xs []float64
	for _, l := range c.Lines {
		for _, p := range l.Points {
			if !slices.Contains(xs, p.X) {
				xs = append(xs, p.X)
			}
		}
	}
	slices.Sort(xs)
	return xs
}

// chartSpec says which benchmark of benchmarks/scaling a chart shows.
type chartSpec struct {
	file, bench, metric, title, note string
}

var chartSpecs = []chartSpec{
	{"insert.svg", "BenchmarkInsert", "ns/object", "insert: cost per object",
		"N objects in key order into an empty table, committed in transactions of 1000"},
	{"lookup.svg", "BenchmarkLookup", "ns/object", "lookup: cost per object",
		"get each of N objects by primary key, in random order, from one snapshot"},
	{"changefeed.svg", "BenchmarkChangeFeed", "ns/object", "change feed: cost per object",
		"read the N changes of a round that replaced all N objects"},
	{"reconcile.svg", "BenchmarkReconcile", "ns/object", "reconciler: cost per object",
		"insert N objects in batches of 1000 and wait until a no-op target has all of them Done"},
	{"reconcile-heap.svg", "BenchmarkReconcile", "heap-B/object", "reconciler: heap in use per object",
		"runtime.MemStats.HeapInuse after GC, table alive, divided by N"},
}

// LineName is how a chart or table names an implementation: steadystate's
// as "steadystate" (its statedb is impl=statedb where peers are databases),
// cilium's as "cilium/statedb" and the version the run records, its lean
// reconciler with " (lean)" after that, others by their impl.
func LineName(s *Set, impl string) string {
	switch impl {
	case "", "statedb", "steadystate":
		return "steadystate"
	case "cilium":
		return CiliumLabel(s)
	case "cilium-lean":
		return CiliumLabel(s) + " (lean)"
	}
	return impl
}

// Charts returns the scaling charts for which s holds results, each line's
// points ordered by size.
func Charts(s *Set) []Chart {
	var charts []Chart
	for _, spec := range chartSpecs {
		c := Chart{File: spec.file, Title: spec.title, Note: spec.note, Metric: spec.metric}
		for _, r := range s.Results {
			n, ok := sizeOf(r, PkgScaling, spec.bench)
			if !ok {
				continue
			}
			y, ok := r.Metric(spec.metric)
			if !ok {
				continue
			}
			name := LineName(s, r.Impl)
			i := slices.IndexFunc(c.Lines, func(l Line) bool { return l.Name == name })
			if i < 0 {
				c.Lines = append(c.Lines, Line{Name: name})
				i = len(c.Lines) - 1
			}
			c.Lines[i].Points = append(c.Lines[i].Points, Point{X: n, Y: y})
		}
		if len(c.Lines) == 0 {
			continue
		}
		for _, l := range c.Lines {
			slices.SortFunc(l.Points, func(a, b Point) int { return cmp.Compare(a.X, b.X) })
		}
		charts = append(charts, c)
	}
	return charts
}

// sizeOf returns N of a result named bench/objects=N in package pkg.
func sizeOf(r *Result, pkg, bench string) (float64, bool) {
	if r.Pkg != pkg {
		return 0, false
	}
	rest, ok := strings.CutPrefix(r.Group, bench+"/objects=")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(rest, 10, 64)
	if err != nil || n == 0 {
		return 0, false
	}
	return float64(n), true
}

// BarChart compares implementations on a few figures of one unit: a group
// of bars per figure, a bar per implementation. cmd/plot draws it to File.
type BarChart struct {
	File, Title, Note string
	Metric            string // the unit on the y axis
	Groups            []string
	Series            []Series
}

// Series is one implementation's figures, one per group of a BarChart
// (NaN where it has none).
type Series struct {
	Name   string
	Values []float64
}

// barSpec says which figures of benchmarks/cilium a bar chart shows.
type barSpec struct {
	file, title, note, metric string
	figures                   []barFigure
}

type barFigure struct{ label, group, unit string }

var barSpecs = []barSpec{
	{"propagation.svg", "propagation delay: steadystate and cilium/statedb", "median per-round percentiles; lower is better", "us",
		[]barFigure{
			{"round trip p50", "BenchmarkPropagationDelay", "p50-us"},
			{"round trip p90", "BenchmarkPropagationDelay", "p90-us"},
			{"round trip p99", "BenchmarkPropagationDelay", "p99-us"},
			{"derive p50", "BenchmarkDerive/load=light", "p50-us"},
			{"derive p90", "BenchmarkDerive/load=light", "p90-us"},
			{"derive p99", "BenchmarkDerive/load=light", "p99-us"},
		}},
}

// BarCharts returns the bar charts for which s holds results: the sides of
// the pairs of benchmarks/cilium (steadystate and cilium) on the same axes.
func BarCharts(s *Set) []BarChart {
	var charts []BarChart
	for _, spec := range barSpecs {
		c := BarChart{File: spec.file, Title: spec.title, Note: spec.note, Metric: spec.metric}
		for _, impl := range []string{"steadystate", "cilium"} {
			ser := Series{Name: LineName(s, impl)}
			found := false
			for _, f := range spec.figures {
				v := math.NaN()
				if r := s.Find(PkgCilium, f.group, impl); r != nil {
					if m, ok := r.Metric(f.unit); ok {
						v, found = m, true
					}
				}
				ser.Values = append(ser.Values, v)
			}
			if found {
				c.Series = append(c.Series, ser)
			}
		}
		if len(c.Series) == 0 {
			continue
		}
		for _, f := range spec.figures {
			c.Groups = append(c.Groups, f.label)
		}
		charts = append(charts, c)
	}
	return charts
}
