package statedb

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"
)

// WriteTxn locks exactly the tables it names and works on private copies of
// their state.
//
// Lock order (the invariant that keeps writers from deadlocking):
//  1. DB.WriteTxn sorts the tables by their position (the order in which
//     they were created) and locks them in that order. Every writer takes
//     table locks in the same global order, so no cycle can form.
//  2. Commit builds the new state of its tables without any other lock.
//  3. Commit takes DB.mu, the innermost lock, copies the current root,
//     replaces its own tables' entries (other tables keep whatever other
//     writers published meanwhile) and publishes the root with one atomic
//     store. DB.mu is held for a copy of a slice, nothing more.
//  4. Only then are watch channels closed, so a woken reader that takes a
//     ReadTxn sees the change.
//  5. Finally the table locks are released, in reverse order.
func (db *DB) WriteTxn(table TableMeta, more ...TableMeta) WriteTxn {
	metas := make([]*tableMeta, 0, 1+len(more))
	metas = append(metas, table.meta())
	for _, t := range more {
		metas = append(metas, t.meta())
	}
	slices.SortFunc(metas, func(a, b *tableMeta) int { return a.pos - b.pos })
	metas = slices.CompactFunc(metas, func(a, b *tableMeta) bool { return a == b })
	for _, m := range metas {
		if m.db != db {
			panic(fmt.Sprintf("statedb: table %q belongs to another DB; open the WriteTxn on the DB the table was created in", m.name))
		}
	}

	measure := db.opts.metricsEnabled()
	var start time.Time
	if measure {
		start = time.Now()
	}
	for _, m := range metas {
		m.lock.Lock()
	}
	acquired := start
	if measure {
		acquired = time.Now()
		for _, m := range metas {
			db.opts.metrics.WriteTxnLockWait(m.name, acquired.Sub(start))
		}
	}

	return db.newWriteTxn(metas, acquired)
}

// newWriteTxn builds a WriteTxn over metas, whose locks the caller holds.
func (db *DB) newWriteTxn(metas []*tableMeta, acquired time.Time) *writeTxn {
	snap := db.root.Load()
	w := &writeTxn{
		db:       db,
		snapshot: snap,
		tables:   make([]txnTable, len(metas)),
		acquired: acquired,
	}
	for i, m := range metas {
		tt := &w.tables[i]
		tt.entry = (*snap)[m.pos]
		// The index slice is shared with the committed entry: copy it
		// before replacing trees in it.
		tt.entry.indexes = slices.Clone(tt.entry.indexes)
		tt.txns = make([]*treeTxn, len(m.indexNames))
		tt.entry.wt = tt
	}

	// A WriteTxn that is dropped without Commit or Abort would hold its
	// locks forever. The cleanup reports it and releases them.
	w.guard = &txnGuard{db: db, metas: metas}
	runtime.Callers(3, w.guard.pc[:])
	runtime.AddCleanup(w, (*txnGuard).dropped, w.guard)
	return w
}

// writeTxn implements WriteTxn.
type writeTxn struct {
	db        *DB
	snapshot  *dbRoot    // state of every table when the txn started
	tables    []txnTable // the locked tables, in lock order
	acquired  time.Time
	guard     *txnGuard
	closed    bool
	committed *dbRoot // set by Commit
}

// txnTable is a locked table inside a WriteTxn.
type txnTable struct {
	entry tableEntry // working copy; entry.wt points back here
	txns  []*treeTxn // open tree transactions, per index, created lazily
	// dirty is set once anything in the entry changed; only dirty tables
	// are published.
	dirty bool
	// changed is set when objects were written; it closes watchAll.
	changed bool
	// initDone is set when the last pending initializer finished in this
	// transaction; the channel is closed after commit.
	initDone bool
	// trackerAdded is set when a change iterator registered in this txn.
	trackerAdded bool
}

// txn returns the open tree transaction of index i, creating it on first use.
func (tt *txnTable) txn(i int) *treeTxn {
	if t := tt.txns[i]; t != nil {
		return t
	}
	t := tt.entry.indexes[i].Txn()
	t.TrackMutate(tt.entry.meta.tracked[i])
	tt.txns[i] = t
	return t
}

func (w *writeTxn) tableEntry(meta TableMeta) *tableEntry {
	m := meta.meta()
	for i := range w.tables {
		if w.tables[i].entry.meta == m {
			return &w.tables[i].entry
		}
	}
	return w.snapshot.tableEntry(meta)
}

// writable returns the locked table m, or an error if the transaction is
// closed or did not lock it.
func (w *writeTxn) writable(m *tableMeta) (*txnTable, error) {
	if w.closed {
		return nil, tableError(m.name, ErrTransactionClosed)
	}
	for i := range w.tables {
		if w.tables[i].entry.meta == m {
			return &w.tables[i], nil
		}
	}
	return nil, tableError(m.name, ErrTableNotLockedForWriting)
}

// txnTableOf returns the locked table m of txn, which must be a WriteTxn of
// this package.
func txnTableOf(txn WriteTxn, m *tableMeta) (*txnTable, error) {
	w, ok := txn.(*writeTxn)
	if !ok {
		return nil, tableError(m.name, fmt.Errorf("%w: %T is not a WriteTxn from DB.WriteTxn", ErrTableNotLockedForWriting, txn))
	}
	return w.writable(m)
}

// Commit publishes the transaction; see the lock order above.
func (w *writeTxn) Commit() ReadTxn {
	if w.closed {
		if w.committed == nil {
			return nil
		}
		return w.committed
	}
	w.closed = true
	db := w.db

	// Step 2: freeze the new trees and gather what to notify afterwards.
	var closeAfter []chan struct{}
	for i := range w.tables {
		tt := &w.tables[i]
		e := &tt.entry
		// Always, not only when objects were written: a change iterator's
		// Next leaves the collection to the writer that holds the table
		// (see collectGraveyardNow). It returns at once when the graveyard
		// is empty.
		tt.collectGraveyard()
		e.wt = nil
		if !tt.dirty {
			continue
		}
		for j, t := range tt.txns {
			if t != nil {
				e.indexes[j] = t.CommitOnly()
			}
		}
		if tt.changed {
			closeAfter = append(closeAfter, e.watchAll)
			e.watchAll = make(chan struct{})
		}
		if tt.initDone {
			closeAfter = append(closeAfter, e.initWatch)
		}
	}

	// Step 3: publish.
	db.mu.Lock()
	cur := *db.root.Load()
	root := make(dbRoot, len(cur))
	copy(root, cur)
	for i := range w.tables {
		tt := &w.tables[i]
		if tt.dirty {
			root[tt.entry.meta.pos] = tt.entry
		}
	}
	db.root.Store(&root)
	db.mu.Unlock()
	w.committed = &root

	// Step 4: wake the watchers.
	for i := range w.tables {
		for _, t := range w.tables[i].txns {
			if t != nil {
				t.Notify()
			}
		}
	}
	for _, ch := range closeAfter {
		close(ch)
	}

	if db.opts.metricsEnabled() {
		for i := range w.tables {
			e := &root[w.tables[i].entry.meta.pos]
			db.opts.metrics.TableObjects(e.meta.name, e.indexes[0].Len())
			db.opts.metrics.TableRevision(e.meta.name, e.revision)
			db.opts.metrics.TableGraveyardObjects(e.meta.name, e.graveyardLen())
		}
	}
	w.release()
	return w.committed
}

// Abort discards the transaction; it is a no-op after Commit or Abort.
func (w *writeTxn) Abort() {
	if w.closed {
		return
	}
	w.closed = true
	for i := range w.tables {
		w.tables[i].entry.wt = nil
	}
	w.release()
}

// release ends the transaction: step 5 of the lock order.
func (w *writeTxn) release() {
	if w.db.opts.metricsEnabled() {
		d := time.Since(w.acquired)
		for i := range w.tables {
			w.db.opts.metrics.WriteTxnDuration(w.tables[i].entry.meta.name, d)
		}
	}
	w.guard.done = true
	w.guard.unlock()
	// Drop the tree transactions so that their memory is freed even if the
	// caller keeps the WriteTxn around.
	for i := range w.tables {
		w.tables[i].txns = nil
	}
}

// timeNow returns the time if the DB measures durations, else the zero time.
func timeNow(db *DB) time.Time {
	if db.opts.metricsEnabled() {
		return time.Now()
	}
	return time.Time{}
}

// txnGuard holds what is needed to release a WriteTxn's locks without
// referencing the WriteTxn itself, so that a dropped transaction can be
// garbage collected and reported.
type txnGuard struct {
	db    *DB
	metas []*tableMeta
	pc    [1]uintptr // the caller of DB.WriteTxn
	done  bool
}

func (g *txnGuard) unlock() {
	for i := len(g.metas) - 1; i >= 0; i-- {
		g.metas[i].lock.Unlock()
	}
}

// dropped runs when a WriteTxn became unreachable. If it was never finished,
// it is reported (with where it was created) and its locks are released.
func (g *txnGuard) dropped() {
	if g.done {
		return
	}
	names := make([]string, len(g.metas))
	for i, m := range g.metas {
		names[i] = m.name
	}
	frame, _ := runtime.CallersFrames(g.pc[:]).Next()
	g.db.opts.logger.Error("statedb: WriteTxn was dropped without Commit or Abort; releasing its locks. Call Commit or Abort on every WriteTxn (e.g. `defer txn.Abort()`).",
		"tables", strings.Join(names, ","),
		"createdAt", fmt.Sprintf("%s:%d", frame.File, frame.Line))
	g.db.droppedTxns.Add(1)
	g.unlock()
}
