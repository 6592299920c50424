package results

import (
	"fmt"
	"slices"
	"strings"
)

// Subjects are the impl values that name steadystate's side of a
// comparison, in order of preference; every other impl in the same group
// is a baseline.
var Subjects = []string{"statedb", "changes", "reconciler", "steadystate"}

// throughputUnits are the units of speed, in order of preference. A
// benchmark without one is compared by ns/op.
var throughputUnits = []string{"objects/sec", "rules/sec"}

// fixedUnits are the columns of the results tables; other metrics are
// listed in the last column.
var fixedUnits = []string{"ns/op", "B/op", "allocs/op"}

// Throughput returns the speed of r in its preferred unit, or 1e9/(ns/op),
// with the unit it is in.
func Throughput(r *Result) (float64, string, bool) {
	for _, u := range throughputUnits {
		if v, ok := r.Metric(u); ok {
			return v, u, true
		}
	}
	if ns, ok := r.Metric("ns/op"); ok && ns > 0 {
		return 1e9 / ns, "ops/sec", true
	}
	return 0, "", false
}

// Speedup returns subject's speed over baseline's (above 1: subject is
// faster), in the first unit both report.
func Speedup(subject, baseline *Result) (float64, bool) {
	for _, u := range append(slices.Clone(throughputUnits), "ns/op") {
		sv, ok1 := subject.Metric(u)
		bv, ok2 := baseline.Metric(u)
		if !ok1 || !ok2 || sv == 0 || bv == 0 {
			continue
		}
		if u == "ns/op" {
			return bv / sv, true
		}
		return sv / bv, true
	}
	return 0, false
}

// split returns the subject of a group's results and its baselines.
func split(rs []*Result) (subject *Result, baselines []*Result) {
	for _, name := range Subjects {
		for _, r := range rs {
			if r.Impl == name {
				subject = r
				break
			}
		}
		if subject != nil {
			break
		}
	}
	if subject == nil {
		return nil, nil
	}
	for _, r := range rs {
		if r != subject {
			baselines = append(baselines, r)
		}
	}
	return subject, baselines
}

// ResultTables returns one table per package: every result with its speed,
// ns/op, B/op, allocs/op and other metrics.
func ResultTables(s *Set) []Table {
	var tables []Table
	for _, pkg := range s.Packages() {
		t := Table{
			Title:  "results: " + ShortPkg(pkg),
			Header: []string{"benchmark", "impl", "speed", "ns/op", "B/op", "allocs/op", "other"},
		}
		for _, r := range s.Results {
			if r.Pkg != pkg {
				continue
			}
			row := []string{r.Group, r.Impl, "-"}
			speedUnit := ""
			for _, u := range throughputUnits {
				if v, ok := r.Metric(u); ok {
					row[2], speedUnit = Format(v)+" "+u, u
					break
				}
			}
			for _, u := range fixedUnits {
				row = append(row, metricCell(r, u))
			}
			var other []string
			for _, u := range r.Units() {
				if u != speedUnit && !slices.Contains(fixedUnits, u) {
					other = append(other, Format(r.Metrics[u])+" "+u)
				}
			}
			t.Rows = append(t.Rows, append(row, strings.Join(other, ", ")))
		}
		tables = append(tables, t)
	}
	return tables
}

// RatioTables returns one table per package that compares steadystate with
// baselines: for each benchmark, the speed of the subject over that of each
// baseline (above 1: steadystate is faster).
func RatioTables(s *Set) []Table {
	var tables []Table
	for _, pkg := range s.Packages() {
		var names []string // baselines, in order of appearance
		type row struct {
			group, subject string
			ratios         map[string]float64
		}
		var rows []row
		for _, g := range s.Groups(pkg) {
			subj, bases := split(s.InGroup(pkg, g))
			if subj == nil || len(bases) == 0 {
				continue
			}
			rw := row{g, subj.Impl, map[string]float64{}}
			for _, b := range bases {
				if v, ok := Speedup(subj, b); ok {
					rw.ratios[b.Impl] = v
					if !slices.Contains(names, b.Impl) {
						names = append(names, b.Impl)
					}
				}
			}
			rows = append(rows, rw)
		}
		if len(names) == 0 {
			continue
		}
		t := Table{
			Title:  "ratios: " + ShortPkg(pkg),
			Note:   "speed of steadystate (subject) / speed of the baseline; above 1x steadystate is faster",
			Header: []string{"benchmark", "subject"},
		}
		for _, n := range names {
			t.Header = append(t.Header, "vs "+n)
		}
		for _, rw := range rows {
			cells := []string{rw.group, rw.subject}
			for _, n := range names {
				if v, ok := rw.ratios[n]; ok {
					cells = append(cells, fmt.Sprintf("%.2fx", v))
				} else {
					cells = append(cells, "-")
				}
			}
			t.Rows = append(t.Rows, cells)
		}
		tables = append(tables, t)
	}
	return tables
}

// TargetsTable lists every target with its goal, its figures and whether
// it was met.
func TargetsTable(outcomes []Outcome) Table {
	t := Table{Title: "targets", Header: []string{"target", "goal", "measured", "status"}}
	for _, o := range outcomes {
		t.Rows = append(t.Rows, []string{o.Target.Name, o.Target.Goal(), o.Figures, o.Status.String()})
	}
	return t
}

// ScalingTables returns, for each scaling chart, its figure per
// implementation (rows) and size (columns).
func ScalingTables(s *Set) []Table {
	var tables []Table
	for _, c := range Charts(s) {
		sizes := c.Sizes()
		t := Table{Title: c.Title, Note: c.Note, Header: []string{"impl"}}
		for _, n := range sizes {
			t.Header = append(t.Header, SizeLabel(n)+" "+c.Metric)
		}
		for _, l := range c.Lines {
			row := []string{l.Name}
			for _, n := range sizes {
				cell := "-"
				for _, p := range l.Points {
					if p.X == n {
						cell = Format(p.Y)
					}
				}
				row = append(row, cell)
			}
			t.Rows = append(t.Rows, row)
		}
		tables = append(tables, t)
	}
	return tables
}

// ReconcileTable returns the end-to-end reconciler figures per size.
func ReconcileTable(s *Set) (Table, bool) {
	t := Table{
		Title:  "reconciler end to end (insert in batches of 1000, no-op target, until all Done)",
		Header: []string{"objects", "reconciler", "objects/sec", "ns/object", "heap in use MB", "heap B/object"},
	}
	for _, r := range s.Results {
		n, ok := sizeOf(r, PkgScaling, "BenchmarkReconcile")
		if !ok {
			continue
		}
		t.Rows = append(t.Rows, []string{SizeLabel(n), LineName(s, r.Impl), metricCell(r, "objects/sec"),
			metricCell(r, "ns/object"), metricCell(r, "heap-MB"), metricCell(r, "heap-B/object")})
	}
	return t, len(t.Rows) > 0
}

// PropagationTable returns every result that reports latency percentiles.
func PropagationTable(s *Set) (Table, bool) {
	t := Table{
		Title:  "propagation delay (commit to table A until visible in derived table B)",
		Header: []string{"benchmark", "p50 us", "p90 us", "p99 us", "objects/sec"},
	}
	for _, r := range s.Results {
		if _, ok := r.Metric("p50-us"); !ok {
			continue
		}
		name := ShortPkg(r.Pkg) + " " + r.Group
		if r.Impl != "" {
			name += " impl=" + r.Impl
		}
		t.Rows = append(t.Rows, []string{name, metricCell(r, "p50-us"), metricCell(r, "p90-us"),
			metricCell(r, "p99-us"), metricCell(r, "objects/sec")})
	}
	return t, len(t.Rows) > 0
}

// machineKeys are the configuration lines of the machine table, with their
// labels. `make bench` writes all but goos, goarch and cpu, which go test
// prints.
var machineKeys = [][2]string{
	{"cpu-model", "CPU"},
	{"cores", "cores"},
	{"goos", "OS"},
	{"goarch", "arch"},
	{"kernel", "kernel"},
	{"go-version", "Go"},
	{"date", "date"},
	{"benchtime", "benchtime"},
	{"count", "count"},
}

// MachineTable describes the machine and the run.
func MachineTable(s *Set) Table {
	t := Table{Title: "machine and run", Header: []string{"what", "value"}}
	for _, kv := range machineKeys {
		v, ok := s.Config[kv[0]]
		if !ok && kv[0] == "cpu-model" {
			v, ok = s.Config["cpu"]
		}
		if ok {
			t.Rows = append(t.Rows, []string{kv[1], v})
		}
	}
	return t
}

// FailedTable lists the lines of the run that report a failure.
func FailedTable(s *Set) (Table, bool) {
	t := Table{Title: "failures in the run", Header: []string{"line"}}
	for _, l := range s.Failed {
		t.Rows = append(t.Rows, []string{l})
	}
	return t, len(t.Rows) > 0
}

func metricCell(r *Result, unit string) string {
	if v, ok := r.Metric(unit); ok {
		return Format(v)
	}
	return "-"
}

// SizeLabel prints an object count as 1k, 10k, 100k, 1M.
func SizeLabel(n float64) string {
	switch {
	case n >= 1e6 && int(n)%1e6 == 0:
		return fmt.Sprintf("%dM", int(n)/1e6)
	case n >= 1e3 && int(n)%1e3 == 0:
		return fmt.Sprintf("%dk", int(n)/1e3)
	default:
		return fmt.Sprintf("%g", n)
	}
}
