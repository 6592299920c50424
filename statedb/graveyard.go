package statedb

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
)

// The graveyard keeps deleted objects, in the table's two graveyard indexes
// (by primary key and by delete revision), for the change iterators that
// have not yet seen the delete. Its bound, stated in the package doc
// ("Deletes are never lost, and kept no longer than needed"), is kept here:
// removeIndexed (table_write.go) adds to it only while an iterator is
// registered, insert takes a re-inserted object out of it, and
// collectGraveyard frees what every iterator has passed, under the table's
// write lock: at every commit of a WriteTxn that locks the table (whether
// or not it wrote objects), and in ChangeIterator.Next and Close when no
// writer holds the table at that moment (TryLock; else that writer's commit
// frees it).

// trackers is the set of change iterators registered on a table. Changes
// registers under the table's write lock, so a WriteTxn sees a consistent
// count; Close may unregister at any time.
type trackers struct {
	mu    sync.Mutex
	list  []*deleteTracker
	count atomic.Int32
}

// deleteTracker is one change iterator's registration: the revision up to
// which it has seen the table.
type deleteTracker struct {
	// position: the iterator has seen every change with a revision below
	// it. Deleted objects below every tracker's position can be freed.
	position atomic.Uint64
}

func (ts *trackers) add(t *deleteTracker) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.list = append(ts.list, t)
	ts.count.Store(int32(len(ts.list)))
	return len(ts.list)
}

func (ts *trackers) remove(t *deleteTracker) (int, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	i := slices.Index(ts.list, t)
	if i < 0 {
		return len(ts.list), false
	}
	ts.list = slices.Delete(ts.list, i, i+1)
	ts.count.Store(int32(len(ts.list)))
	return len(ts.list), true
}

// lowWatermark returns the lowest position of any tracker: deleted objects
// with a lower revision are seen by all. MaxUint64 when there are none.
func (ts *trackers) lowWatermark() Revision {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	low := Revision(math.MaxUint64)
	for _, t := range ts.list {
		low = min(low, t.position.Load())
	}
	return low
}

// collectGraveyard frees the deleted objects that every change iterator has
// passed. It runs inside a WriteTxn that locks the table.
func (tt *txnTable) collectGraveyard() {
	m := tt.entry.meta
	gi, gri := m.graveyardIndex(), m.graveyardRevisionIndex()
	if tt.txns[gri] == nil && tt.entry.indexes[gri].Len() == 0 {
		return
	}
	low := m.trackers.lowWatermark()
	for k, o := range tt.entry.snapshot(gri).All {
		if o.revision >= low {
			break
		}
		tt.txn(gri).Delete(k)
		pk := m.primaryKeyOf(o)
		// The primary-keyed entry may belong to a later delete of the same
		// key; only remove it if it is this one.
		if cur, found := tt.txn(gi).Get(pk); found && cur.revision == o.revision {
			tt.txn(gi).Delete(pk)
		}
		tt.dirty = true
	}
}

// collectGraveyardNow frees what it can of m's graveyard unless a writer
// holds the table, in which case that writer's commit will do it.
func (db *DB) collectGraveyardNow(m *tableMeta) {
	if !m.lock.TryLock() {
		return
	}
	s := getTxnState()
	s.guard.add(m)
	s.guard.hold(db)
	w := db.newWriteTxn(s, timeNow(db))
	s.tables[0].collectGraveyard()
	if s.tables[0].dirty {
		w.Commit()
	} else {
		w.Abort()
	}
}

// graveyardLen returns the number of deleted objects kept in a snapshot.
func (e *tableEntry) graveyardLen() int {
	return e.indexes[e.meta.graveyardIndex()].Len()
}
