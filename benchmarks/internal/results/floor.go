package results

import "fmt"

// The floor (benchmarks/cilium BenchmarkFloor) is the least a commit of an
// MVCC database with watch channels can do: publish a new root and close
// the old root's watch channel. FloorTable sets each side's figures of the
// shapes it bounds against it, as multiples of the floor.

// floorRows pairs a figure of a paired benchmark with the floor that
// bounds it.
var floorRows = []struct {
	label, group, unit, floor string
}{
	{"single-object commit (WriteTxn/batch=1)", "BenchmarkWriteTxn/batch=1", "ns/op", "BenchmarkFloor/op=commit"},
	{"propagation round trip, p50 (PropagationDelay)", "BenchmarkPropagationDelay", "p50-us", "BenchmarkFloor/op=roundtrip"},
	{"commit until a reader sees it, p50 (Derive/load=light)", "BenchmarkDerive/load=light", "p50-us", "BenchmarkFloor/op=wake"},
}

// FloorNote explains FloorTable.
const FloorNote = "floor: a commit that only publishes a new root (a mutex, one atomic store, a new watch channel) " +
	"and closes the old root's channel (op=commit); two of them in PropagationDelay's round trip (op=roundtrip); " +
	"one that wakes a reader in another goroutine (op=wake). x floor: the figure as a multiple of the floor's."

// FloorTable returns, for each figure the floor bounds, steadystate's and
// cilium's medians, the floor's, and each side as a multiple of it.
func FloorTable(s *Set) (Table, bool) {
	t := Table{
		Title:  "against the floor",
		Note:   FloorNote,
		Header: []string{"figure", "unit", "floor", "steadystate", "x floor", "cilium", "x floor"},
	}
	for _, row := range floorRows {
		f := s.Find(PkgCilium, row.floor, "")
		if f == nil {
			continue
		}
		fv, ok := f.Metric(row.unit)
		if !ok || fv == 0 {
			continue
		}
		cells := []string{row.label, row.unit, Format(fv)}
		for _, impl := range []string{"steadystate", "cilium"} {
			v, ok := 0.0, false
			if r := s.Find(PkgCilium, row.group, impl); r != nil {
				v, ok = r.Metric(row.unit)
			}
			if !ok {
				cells = append(cells, "-", "-")
				continue
			}
			cells = append(cells, Format(v), fmt.Sprintf("%.1fx", v/fv))
		}
		t.Rows = append(t.Rows, cells)
	}
	return t, len(t.Rows) > 0
}
