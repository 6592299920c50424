package statedb

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/steadystate/steadystate/index"
)

// The benchmarks of statedb on its own. The same workloads, side by side
// with go-memdb and the raw radix tree, live in the benchmarks/ module (see
// `make bench`); these ones measure statedb alone and need no other module.
//
// Every benchmark reports objects/sec: objects written, looked up or
// iterated per second of wall time.

// benchTableSize is the number of objects in a populated table.
const benchTableSize = 1000

// benchObject is the object of the benchmarks: small, stored by pointer.
type benchObject struct {
	ID    uint64
	Name  string
	Value int
}

var (
	benchIDIndex = Index[*benchObject, uint64]{
		Name:       "id",
		FromObject: func(o *benchObject) index.KeySet { return index.NewKeySet(index.Uint64(o.ID)) },
		FromKey:    index.Uint64,
		Unique:     true,
	}
	benchNameIndex = Index[*benchObject, string]{
		Name:       "name",
		FromObject: func(o *benchObject) index.KeySet { return index.NewKeySet(index.String(o.Name)) },
		FromKey:    index.String,
	}
)

// benchObjects returns n objects with IDs 0..n-1 and names shared by ten
// objects each (so that a name index is non-unique).
func benchObjects(n int) []*benchObject {
	objs := make([]*benchObject, n)
	for i := range objs {
		objs[i] = &benchObject{ID: uint64(i), Name: fmt.Sprintf("name-%04d", i/10), Value: i}
	}
	return objs
}

// benchGenerations returns two copies of benchObjects(n). A writer that
// replaces objects alternates between them, so it never inserts the pointer
// that is already stored (a programming error that statedb rejects), and the
// benchmark does not measure the caller's allocation of new objects.
func benchGenerations(n int) [2][]*benchObject {
	return [2][]*benchObject{benchObjects(n), benchObjects(n)}
}

func newBenchTable(b *testing.B, secondary ...Indexer[*benchObject]) (*DB, RWTable[*benchObject], [2][]*benchObject) {
	b.Helper()
	db := New()
	tbl, err := NewTable(db, "bench", benchIDIndex, secondary...)
	if err != nil {
		b.Fatal(err)
	}
	gens := benchGenerations(benchTableSize)
	wtxn := db.WriteTxn(tbl)
	for _, o := range gens[1] {
		if _, _, err := tbl.Insert(wtxn, o); err != nil {
			b.Fatal(err)
		}
	}
	wtxn.Commit()
	return db, tbl, gens
}

func reportObjectsPerSec(b *testing.B, objects int) {
	b.ReportMetric(float64(objects)/b.Elapsed().Seconds(), "objects/sec")
}

// benchWrites replaces batch objects per WriteTxn in a table of
// benchTableSize objects, cycling over the keys. batch must divide
// benchTableSize.
func benchWrites(b *testing.B, batch int, secondary ...Indexer[*benchObject]) {
	db, tbl, gens := newBenchTable(b, secondary...)
	b.ReportAllocs()
	n, written := 0, 0
	for b.Loop() {
		// Pass p over the keys writes generation p%2; the stored objects
		// are from generation (p-1)%2.
		objs := gens[(n/benchTableSize)%2]
		wtxn := db.WriteTxn(tbl)
		for _, o := range objs[n%benchTableSize : n%benchTableSize+batch] {
			if _, _, err := tbl.Insert(wtxn, o); err != nil {
				b.Fatal(err)
			}
		}
		wtxn.Commit()
		n += batch
		written += batch
	}
	reportObjectsPerSec(b, written)
}

func BenchmarkWriteTxn(b *testing.B) {
	for _, batch := range []int{1, 10, 100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) { benchWrites(b, batch) })
	}
}

// BenchmarkWriteSecondary is BenchmarkWriteTxn/batch=100 on a table with
// one non-unique string index.
func BenchmarkWriteSecondary(b *testing.B) {
	benchWrites(b, 100, benchNameIndex)
}

// BenchmarkInsertRandom1000 inserts 1000 objects in random key order into an
// empty table in one WriteTxn per op. The transaction is aborted, so every op
// starts from the same empty table.
func BenchmarkInsertRandom1000(b *testing.B) {
	db := New()
	tbl, err := NewTable(db, "bench", benchIDIndex)
	if err != nil {
		b.Fatal(err)
	}
	objs := benchObjects(benchTableSize)
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(objs), func(i, j int) { objs[i], objs[j] = objs[j], objs[i] })
	b.ReportAllocs()
	inserted := 0
	for b.Loop() {
		wtxn := db.WriteTxn(tbl)
		for _, o := range objs {
			if _, _, err := tbl.Insert(wtxn, o); err != nil {
				b.Fatal(err)
			}
		}
		wtxn.Abort()
		inserted += len(objs)
	}
	reportObjectsPerSec(b, inserted)
}

// BenchmarkLookup gets each of 1000 objects by primary key, in a random
// order, from one ReadTxn per op. The query key is encoded in the loop, as a
// caller would.
func BenchmarkLookup(b *testing.B) {
	db, tbl, _ := newBenchTable(b)
	ids := make([]uint64, benchTableSize)
	for i := range ids {
		ids[i] = uint64(i)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	b.ReportAllocs()
	found := 0
	for b.Loop() {
		txn := db.ReadTxn()
		for _, id := range ids {
			if _, _, ok := tbl.Get(txn, benchIDIndex.Query(id)); !ok {
				b.Fatalf("object %d not found", id)
			}
		}
		found += len(ids)
	}
	reportObjectsPerSec(b, found)
}

// BenchmarkIterate iterates over all 1000 objects of a table per op.
func BenchmarkIterate(b *testing.B) {
	db, tbl, _ := newBenchTable(b)
	b.ReportAllocs()
	seen := 0
	for b.Loop() {
		n := 0
		for range tbl.All(db.ReadTxn()) {
			n++
		}
		if n != benchTableSize {
			b.Fatalf("iterated %d objects, want %d", n, benchTableSize)
		}
		seen += n
	}
	reportObjectsPerSec(b, seen)
}

// BenchmarkReadTxn takes a snapshot; it must not allocate.
func BenchmarkReadTxn(b *testing.B) {
	db, _, _ := newBenchTable(b)
	b.ReportAllocs()
	var txn ReadTxn
	for b.Loop() {
		txn = db.ReadTxn()
	}
	_ = txn
}

// BenchmarkWriteTxnSingle is one WriteTxn that replaces one object; its
// allocs/op is the cost of the smallest transaction (target: at most 10).
func BenchmarkWriteTxnSingle(b *testing.B) {
	benchWrites(b, 1)
}

func TestReadTxnAllocs(t *testing.T) {
	db, tbl := newTestTable(t, "alloc")
	wtxn := db.WriteTxn(tbl)
	if _, _, err := tbl.Insert(wtxn, &testObject{ID: 1}); err != nil {
		t.Fatal(err)
	}
	wtxn.Commit()
	var txn ReadTxn
	allocs := testing.AllocsPerRun(1000, func() { txn = db.ReadTxn() })
	if allocs != 0 {
		t.Fatalf("DB.ReadTxn allocates %v times per call, want 0", allocs)
	}
	if txn == nil {
		t.Fatal("DB.ReadTxn returned nil")
	}
}
