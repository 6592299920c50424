package statedb

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/steadystate/steadystate/index"
)

// forEachReplay runs test twice: with the deferred indexes replayed as in
// production (in parallel, and on a goroutine of their own while the
// writer goes on, only in large transactions) and with every replay of
// more than one index in parallel and a replay on its own goroutine every
// three writes.
func forEachReplay(t *testing.T, test func(*testing.T)) {
	for _, c := range []struct {
		name  string
		above int64
		async int64
	}{{"inline", parallelReplayAbove.Load(), asyncReplayAt.Load()}, {"parallel", 1, 3}} {
		t.Run(c.name, func(t *testing.T) {
			old, oldAsync := parallelReplayAbove.Swap(c.above), asyncReplayAt.Swap(c.async)
			defer parallelReplayAbove.Store(old)
			defer asyncReplayAt.Store(oldAsync)
			test(t)
		})
	}
}

// A transaction larger than the log's bound (secLogMax writes), with
// reads of the deferred index between its writes, leaves every index as
// a map of the same writes says: inserts, a key moved, deletes.
func TestDeferredIndexLargeTxn(t *testing.T) {
	forEachReplay(t, func(t *testing.T) {
		db := New()
		tbl, err := NewTable(db, "big", idIndex, tagIndex)
		if err != nil {
			t.Fatal(err)
		}
		n := secLogMax + secLogMax/2
		want := map[uint64]string{} // id -> tag
		wtxn := db.WriteTxn(tbl)
		for i := range n {
			id := uint64(i)
			tag := fmt.Sprintf("t%d", i%7)
			if _, _, err := tbl.Insert(wtxn, &testObject{ID: id, Tags: []string{tag}}); err != nil {
				t.Fatal(err)
			}
			want[id] = tag
			if i%10_000 == 0 {
				// A read of the index replays what it has not seen.
				if got := countTag(t, wtxn, tbl, tag); got != countWant(want, tag) {
					t.Fatalf("after %d inserts: %d objects tagged %s, want %d", i+1, got, tag, countWant(want, tag))
				}
			}
		}
		for i := 0; i < n; i += 3 {
			id := uint64(i)
			if _, _, err := tbl.Insert(wtxn, &testObject{ID: id, Tags: []string{"moved"}}); err != nil {
				t.Fatal(err)
			}
			want[id] = "moved"
		}
		for i := 1; i < n; i += 5 {
			id := uint64(i)
			if _, _, err := tbl.Delete(wtxn, &testObject{ID: id}); err != nil {
				t.Fatal(err)
			}
			delete(want, id)
		}
		check := func(txn ReadTxn, where string) {
			t.Helper()
			for _, tag := range []string{"t0", "t3", "t6", "moved"} {
				if got, w := countTag(t, txn, tbl, tag), countWant(want, tag); got != w {
					t.Errorf("%s: %d objects tagged %s, want %d", where, got, tag, w)
				}
			}
			if got := tbl.NumObjects(txn); got != len(want) {
				t.Errorf("%s: %d objects, want %d", where, got, len(want))
			}
		}
		check(wtxn, "in the WriteTxn")
		check(wtxn.Commit(), "committed")
	})
}

func countTag(t *testing.T, txn ReadTxn, tbl Table[*testObject], tag string) int {
	t.Helper()
	n := 0
	for o := range tbl.List(txn, tagIndex.Query(tag)) {
		if !strings.Contains(strings.Join(o.Tags, ","), tag) {
			t.Fatalf("object %d in tag %s has tags %v", o.ID, tag, o.Tags)
		}
		n++
	}
	return n
}

func countWant(want map[uint64]string, tag string) int {
	n := 0
	for _, v := range want {
		if v == tag {
			n++
		}
	}
	return n
}

// boomIndex is a non-unique index by name whose FromObject panics with
// "boom index" for an object named "boom".
var boomIndex = Index[*testObject, string]{
	Name: "boom",
	FromObject: func(o *testObject) index.KeySet {
		if o.Name == "boom" {
			panic("boom index")
		}
		return index.NewKeySet(index.String(o.Name))
	},
	FromKey: index.String,
}

// An index function that panics in a parallel replay panics the Commit
// (on the committing goroutine, where it can be recovered); Abort then
// releases the table.
func TestDeferredIndexPanic(t *testing.T) {
	old := parallelReplayAbove.Swap(1)
	defer parallelReplayAbove.Store(old)
	oldAsync := asyncReplayAt.Swap(1_000_000)
	defer asyncReplayAt.Store(oldAsync)
	db := New()
	tbl, err := NewTable(db, "panicky", idIndex, tagIndex, boomIndex)
	if err != nil {
		t.Fatal(err)
	}
	wtxn := db.WriteTxn(tbl)
	for i := range 100 {
		if _, _, err := tbl.Insert(wtxn, &testObject{ID: uint64(i), Tags: []string{"x"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := tbl.Insert(wtxn, &testObject{ID: 1000, Name: "boom"}); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if p := recover(); p != "boom index" {
				t.Errorf("Commit panicked with %v, want the index's panic", p)
			}
		}()
		wtxn.Commit()
	}()
	wtxn.Abort()
	// The table is free again and unchanged.
	wtxn = db.WriteTxn(tbl)
	if n := tbl.NumObjects(wtxn); n != 0 {
		t.Errorf("%d objects after the failed commit, want 0", n)
	}
	wtxn.Abort()
}

// A panic in a replay on its own goroutine, while the writer goes on,
// comes out of the next read of the index, on the writer's goroutine.
func TestDeferredIndexPanicAsync(t *testing.T) {
	oldAsync := asyncReplayAt.Swap(2)
	defer asyncReplayAt.Store(oldAsync)
	db := New()
	boom := boomIndex
	tbl, err := NewTable(db, "panicky", idIndex, boom)
	if err != nil {
		t.Fatal(err)
	}
	wtxn := db.WriteTxn(tbl)
	for i := range 10 {
		name := "ok"
		if i == 3 {
			name = "boom"
		}
		if _, _, err := tbl.Insert(wtxn, &testObject{ID: uint64(i), Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	func() {
		defer func() {
			if p := recover(); p != "boom index" {
				t.Errorf("the read panicked with %v, want the index's panic", p)
			}
		}()
		tbl.List(wtxn, boom.Query("ok"))
	}()
	wtxn.Abort()
	wtxn = db.WriteTxn(tbl)
	if n := tbl.NumObjects(wtxn); n != 0 {
		t.Errorf("%d objects after the abort, want 0", n)
	}
	wtxn.Abort()
}

// An Abort stops a replay running on its own goroutine at the end of the
// chunk it is in: the rest of the writes, which the Abort throws away, are
// never replayed.
func TestDeferredIndexAbortStopsReplay(t *testing.T) {
	// A replay beside the writer needs a second P (it ran under -cpu 1 too).
	setReplay(t, parallelReplayAbove.Load(), 2000, 2)
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		hold := make(chan struct{})
		slow := Index[*testObject, string]{
			Name: "slow",
			FromObject: func(o *testObject) index.KeySet {
				if calls.Add(1) == 5 {
					<-hold // the replay waits here, in its first chunk
				}
				return index.NewKeySet(index.String(o.Name))
			},
			FromKey: index.String,
		}
		db := New()
		tbl, err := NewTable(db, "slow", idIndex, slow)
		if err != nil {
			t.Fatal(err)
		}
		wtxn := db.WriteTxn(tbl)
		for i := range 2000 { // the 2000th starts the replay
			if _, _, err := tbl.Insert(wtxn, &testObject{ID: uint64(i), Name: "x"}); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait() // the replay waits for hold
		aborted := make(chan struct{})
		go func() {
			wtxn.Abort()
			close(aborted)
		}()
		synctest.Wait() // the Abort waits for the replay
		close(hold)
		<-aborted
		if n := calls.Load(); n != logChunk {
			t.Errorf("the aborted transaction's replay computed %d keys, want %d (its first chunk only)", n, logChunk)
		}
	})
}
