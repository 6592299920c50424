package scaling

import (
	"testing"
	"time"

	"github.com/steadystate/steadystate/statedb"
)

// BenchmarkInsert builds a table of N objects per op: a new, empty store,
// then N objects in key order, committed in transactions of 1000.
func BenchmarkInsert(b *testing.B) {
	forEachSize(b, func(b *testing.B, n int) {
		objs := newObjects(n)
		for _, impl := range impls {
			b.Run("impl="+impl.name, func(b *testing.B) {
				b.ReportAllocs()
				ops := 0
				for b.Loop() {
					writeAll(impl.new(), objs)
					ops++
				}
				reportPerObject(b, ops*n, float64(b.Elapsed().Nanoseconds()))
			})
		}
	})
}

// BenchmarkLookup gets each of the N objects of a table by primary key, in
// random order, from one snapshot per op.
func BenchmarkLookup(b *testing.B) {
	forEachSize(b, func(b *testing.B, n int) {
		objs, ids := newObjects(n), shuffledIDs(n)
		for _, impl := range impls {
			b.Run("impl="+impl.name, func(b *testing.B) {
				s := impl.new()
				writeAll(s, objs)
				b.ReportAllocs()
				ops := 0
				for b.Loop() {
					if got := s.Lookup(ids); got != n {
						b.Fatalf("found %d of %d objects", got, n)
					}
					ops++
				}
				reportPerObject(b, ops*n, float64(b.Elapsed().Nanoseconds()))
			})
		}
	})
}

// BenchmarkChangeFeed reads the changes of a round that replaced all N
// objects of a table (in transactions of 1000): through a ChangeIterator
// (impl=changes), and, as the baseline, by iterating the revision index from
// the previous round's revision (impl=revision-index, which cannot see
// deletes). Each op is a round of writes and its read; ns/op covers both,
// ns/object and objects/sec only the read.
func BenchmarkChangeFeed(b *testing.B) {
	forEachSize(b, func(b *testing.B, n int) {
		for _, impl := range feedImpls {
			b.Run("impl="+impl.name, func(b *testing.B) {
				f := newFeed(b, n, impl.read)
				var read time.Duration
				objects := 0
				for b.Loop() {
					d, got := f.round()
					if got != n {
						b.Fatalf("read %d changes, want %d", got, n)
					}
					read += d
					objects += got
				}
				reportPerObject(b, objects, float64(read.Nanoseconds()))
			})
		}
	})
}

// feed is a table of n objects whose every object is replaced in each
// round, and a reader of its changes.
type feed struct {
	db     *statedb.DB
	tbl    statedb.RWTable[*object]
	n      int
	rounds int
	// read returns the number of changes since its previous call.
	read func() int
}

// feedImpls are the readers of the change-feed benchmark.
var feedImpls = []struct {
	name string
	read func(tb testing.TB, db *statedb.DB, tbl statedb.RWTable[*object]) func() int
}{
	{"changes", changesReader},
	{"revision-index", revisionReader},
}

// newFeed returns a table of n objects whose initial content has been read.
func newFeed(tb testing.TB, n int, reader func(testing.TB, *statedb.DB, statedb.RWTable[*object]) func() int) *feed {
	db := statedb.New()
	tbl, err := statedb.NewTable(db, "objects", idIndex)
	if err != nil {
		tb.Fatal(err)
	}
	f := &feed{db: db, tbl: tbl, n: n, read: reader(tb, db, tbl)}
	f.write()
	if got := f.read(); got != n {
		tb.Fatalf("initial read saw %d objects, want %d", got, n)
	}
	return f
}

// write replaces every object, in transactions of batchSize. New objects
// are allocated each round: a stored object is never inserted again.
func (f *feed) write() {
	f.rounds++
	for i := 0; i < f.n; i += batchSize {
		wtxn := f.db.WriteTxn(f.tbl)
		for id := i; id < min(i+batchSize, f.n); id++ {
			if _, _, err := f.tbl.Insert(wtxn, &object{ID: uint64(id), Value: f.rounds}); err != nil {
				panic(err)
			}
		}
		wtxn.Commit()
	}
}

// round writes a round and returns how long reading its changes took and
// how many there were.
func (f *feed) round() (time.Duration, int) {
	f.write()
	start := time.Now()
	got := f.read()
	return time.Since(start), got
}

func changesReader(tb testing.TB, db *statedb.DB, tbl statedb.RWTable[*object]) func() int {
	wtxn := db.WriteTxn(tbl)
	iter, err := tbl.Changes(wtxn)
	if err != nil {
		tb.Fatal(err)
	}
	wtxn.Commit()
	tb.Cleanup(iter.Close)
	return func() int {
		changes, _ := iter.Next(db.ReadTxn())
		n := 0
		for range changes {
			n++
		}
		return n
	}
}

func revisionReader(_ testing.TB, db *statedb.DB, tbl statedb.RWTable[*object]) func() int {
	var next statedb.Revision
	return func() int {
		txn := db.ReadTxn()
		n := 0
		for range tbl.LowerBound(txn, statedb.ByRevision[*object](next)) {
			n++
		}
		next = tbl.Revision(txn) + 1
		return n
	}
}
