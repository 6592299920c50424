package statedb

import (
	"iter"
	"runtime"

	"github.com/steadystate/steadystate/index"
)

// Changes registers a change iterator on the table. From the moment txn
// commits (or aborts: the registration stays), every delete is kept for the
// iterator until its Next has passed it, so no delete is lost. Close the
// iterator when done; an iterator that is garbage collected unregisters
// itself. Errors: ErrTransactionClosed, ErrTableNotLockedForWriting.
func (t *table[Obj]) Changes(txn WriteTxn) (ChangeIterator[Obj], error) {
	if _, err := txnTableOf(txn, t.tableMeta); err != nil {
		return nil, err
	}
	tr := &deleteTracker{}
	n := t.trackers.add(tr)
	t.db.opts.metrics.ChangeIterators(t.name, n)
	// Deletes are kept for the iterator from the state txn started from
	// on (the table is locked, so nothing else commits meanwhile).
	it := &changeIterator[Obj]{table: t, tracker: tr, registered: txn.(*writeTxn).snapshot.tableEntry(t).revision}
	it.cleanup = runtime.AddCleanup(it, func(tr *deleteTracker) { t.unregister(tr) }, tr)
	return it, nil
}

func (t *table[Obj]) unregister(tr *deleteTracker) {
	if n, ok := t.trackers.remove(tr); ok {
		t.db.opts.metrics.ChangeIterators(t.name, n)
	}
}

// changeIterator implements ChangeIterator. It is not safe for concurrent
// use; each consumer registers its own.
type changeIterator[Obj any] struct {
	table   *table[Obj]
	tracker *deleteTracker
	cleanup runtime.Cleanup
	started bool
	// registered is the table's revision when the iterator was
	// registered: deletes after it are kept for the iterator, earlier ones
	// are not, so the first Next must start from a state at least as new.
	registered Revision
	// next is the lowest revision not yet yielded.
	next   Revision
	closed bool
}

// Next returns the net changes since the previous call in revision order:
// objects inserted or replaced since then (as they are now) and objects
// deleted since then (as they were when deleted). An object changed several
// times is yielded once, in its latest state. The first call yields every
// object present.
//
// The changes are fixed when Next is called; the returned sequence may be
// iterated later (or not at all: they count as seen either way). The
// channel closes when the table changes after txn. Given a WriteTxn, Next
// reads the state committed when that transaction began, never its own
// uncommitted writes (which an Abort would undo). The first call given a
// snapshot older than the iterator's registration reads the DB's current
// state instead: the deletes between the two were not kept for the
// iterator, so starting from the older state would lose them.
func (it *changeIterator[Obj]) Next(txn ReadTxn) (iter.Seq2[Change[Obj], Revision], <-chan struct{}) {
	if it.closed {
		return func(func(Change[Obj], Revision) bool) {}, closedWatch()
	}
	t := it.table
	if w, ok := txn.(*writeTxn); ok && w.open() {
		// Uncommitted writes may still be aborted and their revisions
		// reused: read only what was committed when the txn began. (A
		// finished txn reads as what it committed; see tableEntry.)
		txn = w.snapshot
	}
	e := txn.tableEntry(t)
	if !it.started && (e == nil || e.revision < it.registered) {
		e = t.db.ReadTxn().tableEntry(t)
	}
	if e == nil {
		return func(func(Change[Obj], Revision) bool) {}, closedWatch()
	}
	from := it.next
	upTo := e.revision
	// Only move forward: a ReadTxn older than the previous one has nothing
	// new.
	if it.started && upTo < from {
		return func(func(Change[Obj], Revision) bool) {}, e.watchAll()
	}
	first := !it.started
	it.started = true
	it.next = upTo + 1
	it.tracker.position.Store(it.next)

	live := e.snapshot(t.revisionIndex())
	var dead *treeNode
	if !first {
		dead = e.snapshot(t.graveyardRevisionIndex())
	}
	seq := func(yield func(Change[Obj], Revision) bool) {
		liveIt := live.Iterator()
		liveIt.SeekLowerBound(index.Uint64(from))
		_, lo, lok := liveIt.Next()
		var do object
		var dok bool
		var deadIt *treeIterator
		if dead != nil {
			deadIt = dead.Iterator()
			deadIt.SeekLowerBound(index.Uint64(from))
			_, do, dok = deadIt.Next()
		}
		for {
			if lok && lo.revision > upTo {
				lok = false
			}
			if dok && do.revision > upTo {
				dok = false
			}
			switch {
			case lok && (!dok || lo.revision < do.revision):
				if !yield(Change[Obj]{Object: t.obj(lo), Revision: lo.revision}, lo.revision) {
					return
				}
				_, lo, lok = liveIt.Next()
			case dok:
				if !yield(Change[Obj]{Object: t.obj(do), Revision: do.revision, Deleted: true}, do.revision) {
					return
				}
				_, do, dok = deadIt.Next()
			default:
				return
			}
		}
	}
	// Free what every iterator has now passed, unless a writer holds the
	// table: its commit does it then.
	if e.graveyardLen() > 0 {
		t.db.collectGraveyardNow(t.tableMeta)
	}
	return seq, e.watchAll()
}

// Close unregisters the iterator. Further calls of Next yield nothing.
func (it *changeIterator[Obj]) Close() {
	if it.closed {
		return
	}
	it.closed = true
	it.cleanup.Stop()
	it.table.unregister(it.tracker)
	// Free what only this iterator still needed (not only when it was the
	// last one: it may have been the slowest of several).
	if e := it.table.db.ReadTxn().tableEntry(it.table); e != nil && e.graveyardLen() > 0 {
		it.table.db.collectGraveyardNow(it.table.tableMeta)
	}
}
