package reflector

import (
	"cmp"
	"fmt"
	"iter"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// listFill is a filler that only names its table and the keys it holds.
type listFill struct {
	filler[int]
	table string
	keys  []string
}

func (f *listFill) name() string            { return f.table }
func (f *listFill) known() iter.Seq[string] { return slices.Values(f.keys) }

// mapListEvents is a relist's events as a map of every key makes them:
// items in revision and key order, the last of each key taken.
func mapListEvents(m *Multi[int], items []Item[int], rev uint64) []Event[int] {
	slices.SortStableFunc(items, func(a, b Item[int]) int {
		return cmp.Or(cmp.Compare(a.Revision, b.Revision), cmp.Compare(a.Key, b.Key))
	})
	listed := map[tableKey]int{}
	for i, it := range items {
		listed[tableKey{m.tableOf(it.Table), it.Key}] = i
	}
	var evs []Event[int]
	for _, f := range m.fills {
		for key := range f.known() {
			if _, ok := listed[tableKey{f.name(), key}]; !ok {
				evs = append(evs, Event[int]{Kind: Delete, Table: f.name(), Key: key, Revision: rev})
			}
		}
	}
	for i, it := range items {
		if listed[tableKey{m.tableOf(it.Table), it.Key}] == i {
			evs = append(evs, Event[int]{Kind: Put, Table: it.Table, Key: it.Key, Value: it.Value, Revision: rev})
		}
	}
	return evs
}

// byFill groups events by the fill they go to, in order.
func byFill(m *Multi[int], evs []Event[int]) map[string][]Event[int] {
	out := map[string][]Event[int]{}
	for _, e := range evs {
		out[m.tableOf(e.Table)] = append(out[m.tableOf(e.Table)], e)
	}
	return out
}

// A relist gives each table the events the map of every key gives it (the
// same deletes, the same latest item of each key, in the same order),
// whatever the list: one table or several, items of unknown tables, keys
// listed twice, one revision or several, in key order or not. (Only how
// the tables' events interleave may differ; each table is written on its
// own.)
func TestListEventsModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 20_000 {
		single := rng.IntN(2) == 0
		tables := []string{"a", "b"}
		if single {
			tables = tables[:1]
		}
		var fills []filler[int]
		for _, table := range tables {
			f := &listFill{table: table}
			for k := range 6 {
				if rng.IntN(2) == 0 {
					f.keys = append(f.keys, fmt.Sprint(k))
				}
			}
			fills = append(fills, f)
		}
		m := &Multi[int]{fills: fills, single: single}
		var items []Item[int]
		oneRevision := rng.IntN(2) == 0
		for i := range rng.IntN(12) {
			it := Item[int]{Table: []string{"a", "b", "x"}[rng.IntN(3)], Key: fmt.Sprint(rng.IntN(6)), Value: i}
			if !oneRevision {
				it.Revision = uint64(rng.IntN(3))
			}
			items = append(items, it)
		}
		if rng.IntN(2) == 0 {
			slices.SortStableFunc(items, func(a, b Item[int]) int {
				return cmp.Or(cmp.Compare(m.tableOf(a.Table), m.tableOf(b.Table)), cmp.Compare(a.Key, b.Key))
			})
		}
		want := byFill(m, mapListEvents(m, slices.Clone(items), 7))
		got := byFill(m, m.listEvents(slices.Clone(items), 7))
		if !maps.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("round %d (single %v), items %v:\n got %v\nwant %v", round, single, items, got, want)
		}
	}
}

// BenchmarkListEvents measures a start's relist of a file's version: 60,000
// items of three tables, in table and key order, of one revision, into
// empty tables.
func BenchmarkListEvents(b *testing.B) {
	var fills []filler[int]
	for _, table := range []string{"iptables-rules", "routes", "sysctls"} {
		fills = append(fills, &listFill{table: table})
	}
	m := &Multi[int]{fills: fills}
	var items []Item[int]
	for i := range 10_000 {
		items = append(items, Item[int]{Table: "iptables-rules", Key: fmt.Sprintf("filter/INPUT/rule-%05d", i), Value: i})
	}
	for i := range 50_000 {
		items = append(items, Item[int]{Table: "routes", Key: fmt.Sprintf("254/10.%03d.%03d.0/24/0", i>>8, i&0xff), Value: i})
	}
	items = append(items, Item[int]{Table: "sysctls", Key: "net.ipv4.ip_forward", Value: 1})
	list := make([]Item[int], len(items))
	for b.Loop() {
		copy(list, items)
		if evs := m.listEvents(list, 1); len(evs) != len(items) {
			b.Fatalf("%d events, want %d", len(evs), len(items))
		}
	}
}
