package statedb

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/steadystate/steadystate/internal/memtest"
)

// Memory must depend on live data, never on how many transactions were
// committed (the package doc's "Memory depends on live data"). Each test
// below runs a long series of commits of some shape over a fixed set of
// keys, so the live data stays the same, and fails if the live heap after
// GC grows between a point early in the series and its end by more than
// heapSlack. A leak of even 100 bytes per commit shows up as megabytes here.

const heapSlack = 1 << 20

// liveHeap is memtest.LiveHeap.
var liveHeap = memtest.LiveHeap

// checkHeapBounded runs step(i) for i in [0, commits) and checks that the
// live heap at the end exceeds the one after the first tenth (the warm-up:
// tables filled, pools and buffers at their size) by at most heapSlack.
func checkHeapBounded(t *testing.T, commits int, step func(i int)) {
	t.Helper()
	if testing.Short() {
		commits /= 4
	}
	warm := commits / 10
	var base uint64
	for i := range commits {
		if i == warm {
			base = liveHeap()
		}
		step(i)
	}
	end := liveHeap()
	// step holds the DB: keep it (and so the live data) until measured.
	runtime.KeepAlive(step)
	grown := int64(end) - int64(base)
	t.Logf("%d commits: live heap %d KB after warm-up, %d KB at the end (%+d bytes/commit)",
		commits, base>>10, end>>10, grown/int64(commits-warm))
	if grown > heapSlack {
		t.Fatalf("live heap grew by %d KB over %d commits of constant live data (%d bytes/commit): memory depends on the number of transactions",
			grown>>10, commits-warm, grown/int64(commits-warm))
	}
}

// memTables creates n tables of testObject in one DB.
func memTables(t *testing.T, n int, secondary ...Indexer[*testObject]) (*DB, []RWTable[*testObject]) {
	t.Helper()
	db := New()
	tables := make([]RWTable[*testObject], n)
	for i := range tables {
		tbl, err := NewTable(db, fmt.Sprintf("t%d", i), idIndex, secondary...)
		if err != nil {
			t.Fatal(err)
		}
		tables[i] = tbl
	}
	return db, tables
}

// writeBatch replaces 10 objects of a key space of 1000 in the tables,
// in one transaction that locks all of them.
func writeBatch(t *testing.T, db *DB, i int, tables ...RWTable[*testObject]) {
	metas := make([]TableMeta, len(tables))
	for j, tbl := range tables {
		metas[j] = tbl
	}
	wtxn := db.WriteTxn(metas[0], metas[1:]...)
	for _, tbl := range tables {
		for k := range 10 {
			id := uint64((i*10 + k) % 1000)
			if _, _, err := tbl.Insert(wtxn, &testObject{ID: id, Tags: []string{"a", fmt.Sprint(id % 7)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	wtxn.Commit()
}

func TestMemoryAlternatingTables(t *testing.T) {
	for _, n := range []int{2, 3, 6} {
		t.Run(fmt.Sprintf("tables=%d", n), func(t *testing.T) {
			db, tables := memTables(t, n, tagIndex)
			checkHeapBounded(t, 20_000, func(i int) {
				writeBatch(t, db, i, tables[i%n])
			})
		})
	}
}

// TestMemoryMixedTransactions mixes single-table commits, multi-table
// commits, aborted transactions and deletes over 40 tables, with a change
// iterator that keeps up and read transactions that are dropped.
func TestMemoryMixedTransactions(t *testing.T) {
	db, tables := memTables(t, 40, tagIndex)
	wtxn := db.WriteTxn(tables[0])
	iter, err := tables[0].Changes(wtxn)
	if err != nil {
		t.Fatal(err)
	}
	wtxn.Commit()
	defer iter.Close()
	checkHeapBounded(t, 30_000, func(i int) {
		switch i % 5 {
		case 0:
			writeBatch(t, db, i, tables[i%40], tables[(i+7)%40])
		case 1:
			wtxn := db.WriteTxn(tables[i%40])
			tables[i%40].Insert(wtxn, &testObject{ID: uint64(i % 1000)})
			wtxn.Abort()
		case 2:
			wtxn := db.WriteTxn(tables[0])
			tables[0].Delete(wtxn, &testObject{ID: uint64(i % 1000)})
			wtxn.Commit()
		default:
			writeBatch(t, db, i, tables[i%4])
		}
		if i%3 == 0 {
			changes, _ := iter.Next(db.ReadTxn())
			for range changes {
			}
		}
	})
}

// TestMemoryDeriverChain runs a chain of Derivers (a -> b -> c) while a
// writer of a and the writer of an unrelated table alternate.
func TestMemoryDeriverChain(t *testing.T) {
	db, tables := memTables(t, 4)
	copyObj := func(o *testObject, deleted bool) (*testObject, DeriveResult) {
		if deleted {
			return o, DeriveDelete
		}
		return o.clone(), DeriveInsert
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	for i := range 2 {
		d, err := NewDeriver(db, tables[i].ToTable(), tables[i+1], copyObj)
		if err != nil {
			t.Fatal(err)
		}
		go func() { d.Run(ctx); done <- struct{}{} }()
	}
	defer func() { cancel(); <-done; <-done }()
	checkHeapBounded(t, 20_000, func(i int) {
		if i%2 == 0 {
			writeBatch(t, db, i, tables[0])
		} else {
			writeBatch(t, db, i, tables[3])
		}
		// Let the chain catch up now and then, so that its own commits
		// interleave with the writers'.
		if i%50 == 0 {
			waitRevision(t, db, tables[2], tables[0])
		}
	})
}

// waitRevision waits until dst holds the objects of src at its current
// state (same number of objects with the same IDs at least).
func waitRevision(t *testing.T, db *DB, dst, src RWTable[*testObject]) {
	t.Helper()
	txn := db.ReadTxn()
	want := src.NumObjects(txn)
	for {
		objs, watch := dst.AllWatch(db.ReadTxn())
		n := 0
		for range objs {
			n++
		}
		if n >= want {
			return
		}
		<-watch
	}
}
