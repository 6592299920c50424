package statedb

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
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
func (db *DB) WriteTxn(table TableMeta, more ...TableMeta) WriteTxn {
	g := newGuard(db)
	g.add(table.meta())
	for _, t := range more {
		g.add(t.meta())
	}
	metas := g.list()
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
	// Step 1: lock in the global order (g.list is sorted by position).
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
	runtime.Callers(2, g.pc[:])
	return db.newWriteTxn(g, acquired)
}

// Sizes of the buffers a WriteTxn holds inline, so that a transaction over
// one table with a few indexes, in a DB of a few tables, is a single
// allocation (its guard is recycled). They are kept small: the WriteTxn is
// allocated, zeroed and given its pointer bitmap on every transaction, and
// that cost grows with its size (about 1.3 KB now).
const (
	inlineTables  = 1 // most transactions write one table
	inlineIndexes = 8 // primary, 4 secondary and the 3 reserved indexes
	inlineTxns    = 5 // tree transactions: e.g. primary, 1 secondary, the reserved 3
	inlineRoot    = 4 // tables of the DB whose root a commit holds inline
	guardTables   = 4 // tables a guard holds without a separate slice
)

// newWriteTxn builds a WriteTxn over the tables of g, whose locks the
// caller holds.
func (db *DB) newWriteTxn(g *txnGuard, acquired time.Time) *writeTxn {
	metas := g.list()
	snap := db.root.Load()
	w := &writeTxn{db: db, snapshot: snap, acquired: acquired, guard: g}
	if len(metas) <= inlineTables {
		w.tables = w.tablesBuf[:len(metas)]
	} else {
		w.tables = make([]txnTable, len(metas))
	}
	for i, m := range metas {
		tt := &w.tables[i]
		tt.entry = (*snap)[m.pos]
		n := len(m.indexNames)
		// The index slice is shared with the committed entry: copy it
		// before replacing trees in it.
		if n <= inlineIndexes {
			tt.entry.indexes = append(tt.indexesBuf[:0], tt.entry.indexes...)
			tt.txns = tt.txnsBuf[:n]
		} else {
			tt.entry.indexes = slices.Clone(tt.entry.indexes)
			tt.txns = make([]*treeTxn, n)
		}
		tt.entry.wt = tt
	}

	// A WriteTxn that is dropped without Commit or Abort would hold its
	// locks forever. The guard's finalizer reports it and releases them.
	// (A finalizer on the guard, not the WriteTxn: the WriteTxn points into
	// itself, and a finalizer on an object in a cycle may never run.)
	runtime.SetFinalizer(g, (*txnGuard).dropped)
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
	rootHdr   dbRoot  // the root published by Commit
	rootBuf   [inlineRoot]tableEntry

	tablesBuf [inlineTables]txnTable
	closeBuf  [inlineTables]chan struct{}
}

// txnTable is a locked table inside a WriteTxn.
type txnTable struct {
	entry tableEntry // working copy; entry.wt points back here
	txns  []*treeTxn // open tree transactions, per index, created lazily
	// dirty is set once anything in the entry changed; only dirty tables
	// are published.
	dirty bool
	// changed is set when objects were written.
	changed bool
	// initDone is set when the last pending initializer finished in this
	// transaction; the channel is closed after commit.
	initDone bool

	indexesBuf [inlineIndexes]tree
	txnsBuf    [inlineIndexes]*treeTxn
	txnVals    [inlineTxns]treeTxn
}

// txn returns the open tree transaction of index i, creating it on first use.
func (tt *txnTable) txn(i int) *treeTxn {
	if t := tt.txns[i]; t != nil {
		return t
	}
	var t *treeTxn
	if i < inlineTxns {
		t = &tt.txnVals[i]
		tt.entry.indexes[i].InitTxn(t)
	} else {
		t = tt.entry.indexes[i].Txn()
	}
	t.TrackMutate(tt.entry.meta.tracked[i])
	tt.txns[i] = t
	return t
}

func (w *writeTxn) tableEntry(meta TableMeta) *tableEntry {
	m := meta.meta()
	if w.closed {
		// A finished transaction reads as what it committed, or (aborted)
		// as the state it started from.
		if w.committed != nil {
			return w.committed.tableEntry(meta)
		}
		return w.snapshot.tableEntry(meta)
	}
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

// Commit publishes the transaction: steps 2 to 5 of the lock order in the
// package doc.
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
	closeAfter := w.closeBuf[:0]
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
				e.indexes[j] = t.Freeze()
			}
		}
		// The committed entry gets an indexes array of its own: the
		// working one lives in this WriteTxn. Memory bounded by live data
		// (package doc) depends on it; see tableEntry.
		e.indexes = slices.Clone(e.indexes)
		if tt.initDone {
			closeAfter = append(closeAfter, e.initWatch)
		}
	}

	// Step 3: publish.
	db.mu.Lock()
	cur := *db.root.Load()
	// The root (its slice header, and its entries for a DB of up to
	// inlineRoot tables) lives in the WriteTxn: one allocation less per
	// commit. Nothing that a committed entry refers to points back into
	// the WriteTxn, so the root it holds is kept only by whoever holds the
	// transaction or that snapshot.
	if len(cur) <= len(w.rootBuf) {
		w.rootHdr = w.rootBuf[:len(cur):len(cur)]
	} else {
		w.rootHdr = make(dbRoot, len(cur))
	}
	root := w.rootHdr
	copy(root, cur)
	for i := range w.tables {
		tt := &w.tables[i]
		if tt.dirty {
			root[tt.entry.meta.pos] = tt.entry
		}
	}
	db.root.Store(&w.rootHdr)
	db.mu.Unlock()
	w.committed = &w.rootHdr

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
	runtime.SetFinalizer(w.guard, nil)
	freeGuard(w.guard)
	w.guard = nil
	// The published root may live in this WriteTxn (rootBuf): drop what
	// would keep older states alive through it. (Reads through the
	// finished txn use w.committed.)
	if w.committed != nil {
		w.snapshot = nil
	}
	for i := range w.tables {
		tt := &w.tables[i]
		tt.txns = nil
		clear(tt.txnsBuf[:])
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
// garbage collected and reported. It holds no pointer into itself (the
// tables are an array, not a slice of it), which a finalizer requires.
type txnGuard struct {
	db    *DB
	metas [guardTables]*tableMeta // the locked tables, in lock order...
	n     int
	more  []*tableMeta // ...or all of them here, when there are more
	pc    [1]uintptr   // the caller of DB.WriteTxn
	done  bool
}

// guards recycles the guards of finished transactions: a finished guard has
// no finalizer and nothing refers to it any more.
var guards = sync.Pool{New: func() any { return new(txnGuard) }}

func newGuard(db *DB) *txnGuard {
	g := guards.Get().(*txnGuard)
	g.db = db
	return g
}

func freeGuard(g *txnGuard) {
	*g = txnGuard{}
	guards.Put(g)
}

// add adds m to the tables of the transaction, keeping them sorted by
// position (the lock order) and without duplicates.
func (g *txnGuard) add(m *tableMeta) {
	list := g.list()
	if slices.Contains(list, m) {
		return
	}
	if g.more == nil && g.n < len(g.metas) {
		g.metas[g.n] = m
		g.n++
	} else {
		if g.more == nil {
			g.more = append(make([]*tableMeta, 0, 2*len(g.metas)), g.metas[:g.n]...)
		}
		g.more = append(g.more, m)
	}
	list = g.list()
	for i := len(list) - 1; i > 0 && list[i].pos < list[i-1].pos; i-- {
		list[i], list[i-1] = list[i-1], list[i]
	}
}

// list returns the tables in lock order. The slice must not be kept.
func (g *txnGuard) list() []*tableMeta {
	if g.more != nil {
		return g.more
	}
	return g.metas[:g.n]
}

func (g *txnGuard) unlock() {
	list := g.list()
	for i := len(list) - 1; i >= 0; i-- {
		list[i].lock.Unlock()
	}
}

// dropped runs when a WriteTxn became unreachable. If it was never finished,
// it is reported (with where it was created) and its locks are released.
func (g *txnGuard) dropped() {
	if g.done {
		return
	}
	var names []string
	for _, m := range g.list() {
		names = append(names, m.name)
	}
	frame, _ := runtime.CallersFrames(g.pc[:]).Next()
	g.db.opts.logger.Error("statedb: WriteTxn was dropped without Commit or Abort; releasing its locks. Call Commit or Abort on every WriteTxn (e.g. `defer txn.Abort()`).",
		"tables", strings.Join(names, ","),
		"createdAt", fmt.Sprintf("%s:%d", frame.File, frame.Line))
	g.db.droppedTxns.Add(1)
	g.unlock()
}
