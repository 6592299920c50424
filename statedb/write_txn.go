package statedb

import (
	"fmt"
	"time"
)

// WriteTxn starts a write transaction over exactly the named tables: it
// locks them (waiting for their current writers) and works on private
// copies of their state until Commit or Abort. Naming a table twice is
// harmless; a table of another DB panics.
//
// The lock order that keeps writers from deadlocking is stated step by step
// in the package doc ("Writers never deadlock"); this is step 1, Commit has
// steps 2 to 4, release step 5.
//
// It is never inlined: it records its caller with callerPC.
//
//go:noinline
func (db *DB) WriteTxn(table TableMeta, more ...TableMeta) WriteTxn {
	s := getTxnState()
	g := s.guard
	g.add(table.meta())
	for _, t := range more {
		g.add(t.meta())
	}
	metas := g.list()
	for _, m := range metas {
		if m.db != db {
			putTxnState(s)
			panic(fmt.Sprintf("statedb: table %q belongs to another DB; open the WriteTxn on the DB the table was created in", m.name))
		}
	}

	measure := db.opts.metricsEnabled()
	var start time.Time
	if measure {
		start = time.Now()
	}
	// Step 1: lock in the global order (g.list is sorted by position).
	for _, m := range metas {
		m.lock.Lock()
	}
	g.hold(db)
	acquired := start
	if measure {
		acquired = time.Now()
		for _, m := range metas {
			db.opts.metrics.WriteTxnLockWait(m.name, acquired.Sub(start))
		}
	}
	g.pc[0] = callerPC()
	return db.newWriteTxn(s, acquired)
}

// inlineRoot is the number of tables of a DB whose committed root a
// WriteTxn holds inline, so that publishing it costs no allocation.
const inlineRoot = 4

// writeTxn implements WriteTxn. It is the small part of a transaction that
// the caller holds and that outlives it: the working state (tree
// transactions, copies of the locked tables, the guard) is pooled and goes
// back to the pool at Commit or Abort, and the root that Commit publishes
// lives here.
type writeTxn struct {
	db *DB
	// s is the working state; nil once the transaction is finished.
	s *txnState
	// snapshot is the state of every table when the transaction started;
	// dropped at Commit, so that a kept transaction keeps only what it
	// committed.
	snapshot *dbRoot
	// committed is the published root (&root), set by Commit.
	committed *dbRoot
	root      dbRoot
	rootBuf   [inlineRoot]*tableEntry
}

// newWriteTxn builds a WriteTxn over the tables of s's guard, whose locks
// the caller holds.
func (db *DB) newWriteTxn(s *txnState, acquired time.Time) *writeTxn {
	snap := db.root.Load()
	s.start(db, snap, acquired)
	return &writeTxn{db: db, s: s, snapshot: snap}
}

// open reports whether the transaction is neither committed nor aborted.
func (w *writeTxn) open() bool { return w.s != nil }

func (w *writeTxn) tableEntry(meta TableMeta) *tableEntry {
	if w.s == nil {
		// A finished transaction reads as what it committed, or (aborted)
		// as the state it started from.
		if w.committed != nil {
			return w.committed.tableEntry(meta)
		}
		return w.snapshot.tableEntry(meta)
	}
	if tt := w.s.table(meta.meta()); tt != nil {
		return &tt.entry
	}
	return w.snapshot.tableEntry(meta)
}

// writable returns the locked table m, or an error if the transaction is
// closed or did not lock it.
func (w *writeTxn) writable(m *tableMeta) (*txnTable, error) {
	if w.s == nil {
		return nil, tableError(m.name, ErrTransactionClosed)
	}
	if tt := w.s.table(m); tt != nil {
		return tt, nil
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

// Commit publishes the transaction: steps 2 to 5 of the lock order in the
// package doc.
func (w *writeTxn) Commit() ReadTxn {
	s := w.s
	if s == nil {
		if w.committed == nil {
			return nil
		}
		return w.committed
	}
	db := w.db

	// Step 2: freeze the new trees into new committed entries, and gather
	// what to notify afterwards.
	closeAfter := s.freeze()

	// Step 3: publish. The root (its slice header, and its entries for a
	// DB of up to inlineRoot tables) lives in this WriteTxn: one
	// allocation less per commit. The entries it points to are
	// allocations of their own that point nowhere into a WriteTxn (see
	// tableEntry), so the root here is kept only by whoever holds this
	// transaction or that snapshot.
	db.mu.Lock()
	cur := *db.root.Load()
	if len(cur) <= len(w.rootBuf) {
		w.root = w.rootBuf[:len(cur):len(cur)]
	} else {
		w.root = make(dbRoot, len(cur))
	}
	copy(w.root, cur)
	for i := range s.tables {
		if tt := &s.tables[i]; tt.published != nil {
			w.root[tt.published.meta.pos] = tt.published
		}
	}
	db.root.Store(&w.root)
	db.mu.Unlock()
	w.committed = &w.root

	// Step 4: wake the watchers, now that the new root is visible.
	s.notify()
	for _, ch := range closeAfter {
		close(ch)
	}

	if db.opts.metricsEnabled() {
		for i := range s.tables {
			e := w.root[s.tables[i].entry.meta.pos]
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
	if w.s == nil {
		return
	}
	w.release()
}

// release ends the transaction: step 5 of the lock order. The working state
// goes back to the pool; the transaction keeps only what reads through it
// still need.
func (w *writeTxn) release() {
	s := w.s
	if w.db.opts.metricsEnabled() {
		d := time.Since(s.acquired)
		for i := range s.tables {
			w.db.opts.metrics.WriteTxnDuration(s.tables[i].entry.meta.name, d)
		}
	}
	s.guard.release()
	w.s = nil
	putTxnState(s)
	// Reads through the committed txn use w.committed: drop what would
	// keep the older state alive.
	if w.committed != nil {
		w.snapshot = nil
	}
}

// timeNow returns the time if the DB measures durations, else the zero time.
func timeNow(db *DB) time.Time {
	if db.opts.metricsEnabled() {
		return time.Now()
	}
	return time.Time{}
}
