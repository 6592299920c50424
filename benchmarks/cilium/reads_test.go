package cilium

import (
	"fmt"
	"testing"

	cstatedb "github.com/cilium/statedb"

	"github.com/steadystate/steadystate/statedb"
)

// BenchmarkRandomLookup gets each of 1000 objects by primary key, in a
// fixed random order, from one snapshot per op, in cilium's
// BenchmarkDB_RandomLookup shape: the queries are built before the loop.
func BenchmarkRandomLookup(b *testing.B) {
	keys := shuffled(randomInsertSize, 2)
	newSS := func(tb testing.TB) lookuper { return newSSLookup(tb, keys) }
	newCilium := func(tb testing.TB) lookuper { return newCiliumLookup(tb, keys) }
	pair(b, newSS, newCilium, func(b *testing.B, l lookuper) {
		n := 0
		for b.Loop() {
			if got := l.lookup(); got != len(keys) {
				b.Fatalf("found %d of %d objects", got, len(keys))
			}
			n += len(keys)
		}
		reportObjectsPerSec(b, n)
	})
}

// iterationSize is the table of FullIteration, as in cilium's benchmark.
func iterationSize() int { return sized(100_000, 10_000) }

// BenchmarkFullIteration walks a table of 100k objects with All per op,
// checking that the keys come in order, in cilium's
// BenchmarkDB_FullIteration_All shape.
func BenchmarkFullIteration(b *testing.B) {
	n := iterationSize()
	newSS := func(tb testing.TB) iterator { s := newSSDB(tb, "objects"); s.fill(0, ids(n)); return s }
	newCilium := func(tb testing.TB) iterator { c := newCiDB(tb, "objects"); c.fill(0, ids(n)); return c }
	pair(b, newSS, newCilium, func(b *testing.B, it iterator) {
		objects := 0
		for b.Loop() {
			if err := it.iterate(n); err != nil {
				b.Fatal(err)
			}
			objects += n
		}
		reportObjectsPerSec(b, objects)
	})
}

// lookuper is a side of RandomLookup.
type lookuper interface {
	// lookup gets every prepared query from one snapshot and returns how
	// many objects it found.
	lookup() int
}

// iterator is a side of FullIteration.
type iterator interface {
	// iterate walks table 0 of one snapshot and fails unless it holds the
	// IDs 0..n-1 in order.
	iterate(n int) error
}

type ssLookup struct {
	*ssDB
	queries []statedb.Query[*object]
}

func newSSLookup(tb testing.TB, keys []uint64) *ssLookup {
	l := &ssLookup{ssDB: newSSDB(tb, "objects")}
	l.fill(0, ids(len(keys)))
	for _, k := range keys {
		l.queries = append(l.queries, ssID.Query(k))
	}
	return l
}

func (l *ssLookup) lookup() int {
	txn, tbl := l.db.ReadTxn(), l.tables[0]
	found := 0
	for _, q := range l.queries {
		if _, _, ok := tbl.Get(txn, q); ok {
			found++
		}
	}
	return found
}

type ciLookup struct {
	*ciDB
	queries []cstatedb.Query[*object]
}

func newCiliumLookup(tb testing.TB, keys []uint64) *ciLookup {
	l := &ciLookup{ciDB: newCiDB(tb, "objects")}
	l.fill(0, ids(len(keys)))
	for _, k := range keys {
		l.queries = append(l.queries, ciID.Query(k))
	}
	return l
}

func (l *ciLookup) lookup() int {
	txn, tbl := l.db.ReadTxn(), l.tables[0]
	found := 0
	for _, q := range l.queries {
		if _, _, ok := tbl.Get(txn, q); ok {
			found++
		}
	}
	return found
}

func (s *ssDB) iterate(n int) error {
	next := uint64(0)
	for o := range s.tables[0].All(s.db.ReadTxn()) {
		if o.ID != next {
			return fmt.Errorf("got ID %d, want %d", o.ID, next)
		}
		next++
	}
	if next != uint64(n) {
		return fmt.Errorf("iterated %d objects, want %d", next, n)
	}
	return nil
}

func (c *ciDB) iterate(n int) error {
	next := uint64(0)
	for o := range c.tables[0].All(c.db.ReadTxn()) {
		if o.ID != next {
			return fmt.Errorf("got ID %d, want %d", o.ID, next)
		}
		next++
	}
	if next != uint64(n) {
		return fmt.Errorf("iterated %d objects, want %d", next, n)
	}
	return nil
}
