package statedb_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/steadystate/steadystate/benchmarks/internal/stores"
)

// tableSize is the number of objects in a populated table.
const tableSize = 1000

// The workloads. Each runs once per implementation, as sub-benchmarks
// impl=statedb, impl=memdb and impl=iradix, and reports objects/sec: objects
// written, looked up or iterated per second of wall time.

// BenchmarkWriteTxn replaces batch objects per committed transaction in a
// table of 1000, cycling over the keys.
func BenchmarkWriteTxn(b *testing.B) {
	for _, batch := range []int{1, 10, 100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			forEachImpl(b, func(b *testing.B, s stores.Database) { benchWrites(b, s, batch) }, false)
		})
	}
}

// BenchmarkWriteSecondary is WriteTxn/batch=100 on a table with one
// non-unique string index besides the primary one.
func BenchmarkWriteSecondary(b *testing.B) {
	forEachImpl(b, func(b *testing.B, s stores.Database) { benchWrites(b, s, 100) }, true)
}

// BenchmarkInsertRandom1000 inserts 1000 objects in random key order into an
// empty table in one transaction per op; the transaction is aborted so that
// every op starts from the same empty table.
func BenchmarkInsertRandom1000(b *testing.B) {
	objs := newObjects(tableSize)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(objs), func(i, j int) { objs[i], objs[j] = objs[j], objs[i] })
	for _, impl := range stores.Databases {
		b.Run("impl="+impl.Name, func(b *testing.B) {
			s := stores.Must(impl.New(false))
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				s.InsertAbort(objs)
				n += len(objs)
			}
			reportObjectsPerSec(b, n)
		})
	}
}

// BenchmarkLookup gets each of 1000 objects by primary key, in a fixed random
// order, from one snapshot per op. Every implementation encodes the uint64
// key inside the loop, as a caller would.
func BenchmarkLookup(b *testing.B) {
	ids := make([]uint64, tableSize)
	for i := range ids {
		ids[i] = uint64(i)
	}
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	forEachImpl(b, func(b *testing.B, s stores.Database) {
		n := 0
		for b.Loop() {
			if got := s.Lookup(ids); got != len(ids) {
				b.Fatalf("found %d of %d objects", got, len(ids))
			}
			n += len(ids)
		}
		reportObjectsPerSec(b, n)
	}, false)
}

// BenchmarkIterate walks all 1000 objects of a table per op.
func BenchmarkIterate(b *testing.B) {
	forEachImpl(b, func(b *testing.B, s stores.Database) {
		n := 0
		for b.Loop() {
			if got := s.Iterate(); got != tableSize {
				b.Fatalf("iterated %d objects, want %d", got, tableSize)
			}
			n += tableSize
		}
		reportObjectsPerSec(b, n)
	}, false)
}

// forEachImpl runs fn as sub-benchmark impl=<name> on a store of each
// implementation, populated with tableSize objects.
func forEachImpl(b *testing.B, fn func(b *testing.B, s stores.Database), secondary bool) {
	for _, impl := range stores.Databases {
		b.Run("impl="+impl.Name, func(b *testing.B) {
			s := stores.Must(impl.New(secondary))
			s.Write(populated)
			b.ReportAllocs()
			fn(b, s)
		})
	}
}

// populated is the initial content of every store; the writers replace it
// with objects from generations, never with these.
var populated = newObjects(tableSize)

// generations are two sets of the same objects. A writer alternates between
// them by pass over the keys, so it never inserts the pointer that is
// already stored (which statedb rejects: stored objects are immutable), and
// no workload measures the caller's allocation of new objects.
var generations = [2][]*object{newObjects(tableSize), newObjects(tableSize)}

// benchWrites replaces batch objects per transaction, cycling over the keys
// of a table of tableSize objects. batch must divide tableSize.
func benchWrites(b *testing.B, s stores.Database, batch int) {
	next := 0 // objects written so far; next%tableSize is the next key
	for b.Loop() {
		objs := generations[(next/tableSize)%2]
		start := next % tableSize
		s.Write(objs[start : start+batch])
		next += batch
	}
	reportObjectsPerSec(b, next)
}

func reportObjectsPerSec(b *testing.B, objects int) {
	b.ReportMetric(float64(objects)/b.Elapsed().Seconds(), "objects/sec")
}
