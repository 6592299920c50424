package statedb

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// The working state of a WriteTxn, and the guard that releases a dropped
// transaction's locks. Both are recycled through txnStates, so that a
// transaction allocates only its small handle (writeTxn), the committed
// entries of the tables it changed and its tree nodes.

// Sizes of the buffers a txnState holds inline, so that a transaction over
// one table with a few indexes needs nothing more. The state is reused, so
// its size costs nothing per transaction.
const (
	inlineTables  = 2 // most transactions write one or two tables
	inlineIndexes = 8 // primary, 4 secondary and the 3 reserved indexes
	inlineTxns    = 5 // tree transactions: e.g. primary, 1 secondary, the reserved 3
	guardTables   = 4 // tables a guard holds without a separate slice

)

// txnState is the pooled, working part of a WriteTxn.
type txnState struct {
	guard    *txnGuard // for the state's whole life; see txnGuard
	acquired time.Time
	tables   []txnTable // the locked tables, in lock order

	tablesBuf [inlineTables]txnTable
	closeBuf  [inlineTables]chan struct{}
}

// txnTable is a locked table inside a WriteTxn.
type txnTable struct {
	entry tableEntry // working copy; entry.wt points back here
	txns  []*treeTxn // open tree transactions, per index, created lazily
	// published is the committed entry that Commit made of entry, nil if
	// the table did not change.
	published *tableEntry
	// dirty is set once anything in the entry changed; only dirty tables
	// are published.
	dirty bool
	// changed is set when objects were written.
	changed bool
	// initDone is set when the last pending initializer finished in this
	// transaction; the channel is closed after commit.
	initDone bool
	// initOwned is set once entry.init is this transaction's own copy.
	initOwned bool

	// revPending are the revision index's additions not yet in its tree,
	// in revision order, all above revFlushed (see revision_index.go).
	revPending []object
	revRemoved []Revision
	revFlushed Revision

	// scratch and revBuf hold tree keys for lookups and deletes, and for
	// inserts that copy what they keep (radix.Txn.InsertCopy), so that
	// replacing an object whose keys stay allocates none for them.
	scratch []byte
	revBuf  [8]byte
	// keyBufs hold an object's old and new key in an index of one key
	// (table.appendKey) while a write compares them.
	keyBufs [2][]byte
	// secLog holds the writes the deferred indexes have yet to replay;
	// secDone[pos] is how many of them index pos has (deferred_index.go).
	// keys are the buffers of replays on the transaction's goroutine.
	secLog  writeLog
	secDone []int
	keys    keyScratch
	// async is the replay running on goroutines of its own, if any;
	// secAsync the writes handed to replays so far; asyncKeys the
	// buffers of its goroutines, one each.
	async     *asyncReplay
	secAsync  int
	asyncKeys []*keyScratch

	bigIndexes []tree // the working trees of a table of many indexes
	txnsBuf    [inlineIndexes]*treeTxn
	txnVals    [inlineTxns]treeTxn
}

// txnStates recycles the states of finished transactions.
var txnStates = sync.Pool{New: func() any {
	g := &txnGuard{}
	// Set once for the guard's life, not per transaction (it costs a lock
	// and a record in the runtime): it runs when the state is dropped,
	// either by the pool (then nothing is held) or with a transaction
	// that was never finished.
	runtime.SetFinalizer(g, (*txnGuard).dropped)
	return &txnState{guard: g}
}}

func getTxnState() *txnState { return txnStates.Get().(*txnState) }

// putTxnState clears s of everything a transaction left in it, so that
// the pool keeps no tree or object alive, and pools it.
func putTxnState(s *txnState) {
	for i := range s.tables {
		s.tables[i].clear()
	}
	s.tables = s.tables[:0]
	s.guard.reset()
	clear(s.closeBuf[:])
	txnStates.Put(s)
}

// start readies s for a transaction over the tables of its guard, from
// the committed state snap.
func (s *txnState) start(db *DB, snap *dbRoot, acquired time.Time) {
	metas := s.guard.list()
	s.acquired = acquired
	if len(metas) <= len(s.tablesBuf) {
		s.tables = s.tablesBuf[:len(metas)]
	} else {
		s.tables = make([]txnTable, len(metas))
	}
	for i, m := range metas {
		s.tables[i].start((*snap)[m.pos])
	}
}

// table returns the locked table m, or nil.
func (s *txnState) table(m *tableMeta) *txnTable {
	for i := range s.tables {
		if s.tables[i].entry.meta == m {
			return &s.tables[i]
		}
	}
	return nil
}

// start makes tt a working copy of the committed entry c.
func (tt *txnTable) start(c *tableEntry) {
	e := &tt.entry
	e.meta, e.revision, e.init, e.wt = c.meta, c.revision, c.init, tt
	tt.revFlushed = c.revision
	n := len(c.indexes)
	if n <= inlineTrees {
		e.indexes = e.trees[:n]
		copy(e.indexes, c.indexes)
	} else {
		tt.bigIndexes = append(tt.bigIndexes[:0], c.indexes...)
		e.indexes = tt.bigIndexes
	}
	if n <= inlineIndexes {
		tt.txns = tt.txnsBuf[:n]
	} else {
		tt.txns = make([]*treeTxn, n)
	}
	if cap(tt.secDone) >= n {
		tt.secDone = tt.secDone[:n]
	} else {
		tt.secDone = make([]int, n)
	}
}

// clear drops every reference of a finished transaction.
// It writes only what a transaction may have set (a pooled state is
// cleared on every transaction, and a bulk clear of its buffers would cost
// more than the rest of a small commit).
func (tt *txnTable) clear() {
	tt.clearLog() // first: it waits for a replay that uses the trees
	for i, t := range tt.txns {
		if t != nil {
			t.Discard()
			tt.txns[i] = nil
		}
	}
	e := &tt.entry
	if len(e.indexes) <= inlineTrees {
		clear(e.trees[:len(e.indexes)])
	} else {
		clear(tt.bigIndexes)
	}
	e.meta, e.indexes, e.init, e.wt = nil, nil, nil, nil
	clear(tt.revPending)
	tt.revPending, tt.revRemoved = tt.revPending[:0], tt.revRemoved[:0]

	tt.txns = nil
	tt.published = nil
	tt.dirty, tt.changed, tt.initDone, tt.initOwned = false, false, false, false
}

// revKey returns the revision index key of rev in tt's buffer, valid until
// the next call.
func (tt *txnTable) revKey(rev Revision) []byte {
	binary.BigEndian.PutUint64(tt.revBuf[:], rev)
	return tt.revBuf[:]
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

// ownInit makes the working entry's initialization state the
// transaction's own copy (a committed one is never changed), creating it
// if the table had none.
func (tt *txnTable) ownInit() *tableInit {
	e := &tt.entry
	if !tt.initOwned {
		ini := &tableInit{}
		if e.init != nil {
			ini.pending = slices.Clone(e.init.pending)
			ini.watch = e.init.watch
		}
		e.init = ini
		tt.initOwned = true
	}
	return e.init
}

// freeze is step 2 of Commit: it frees the graveyard's passed objects,
// freezes the trees of every changed table into a new committed entry
// (txnTable.published) and returns the initialization channels to close
// after publishing.
func (s *txnState) freeze() []chan struct{} {
	closeAfter := s.closeBuf[:0]
	for i := range s.tables {
		// Always, not only when objects were written: a change iterator's
		// Next leaves the collection to the writer that holds the table
		// (see collectGraveyardNow). It returns at once when the graveyard
		// is empty.
		s.tables[i].collectGraveyard()
	}
	s.flushAll()
	for i := range s.tables {
		tt := &s.tables[i]
		e := &tt.entry
		e.wt = nil
		if !tt.dirty {
			continue
		}
		for j, t := range tt.txns {
			if t != nil {
				e.indexes[j] = t.Freeze()
			}
		}
		tt.published = e.committed()
		if tt.initDone {
			closeAfter = append(closeAfter, e.init.watch)
		}
	}
	return closeAfter
}

// flushAll brings every table's deferred and revision indexes up to date
// (in parallel when there is much to do).
func (s *txnState) flushAll() {
	var buf [inlineTables]*txnTable
	tables := buf[:0]
	for i := range s.tables {
		tables = append(tables, &s.tables[i])
	}
	flushDeferred(tables)
}

// notify closes the watch channels of what the committed writes replaced.
func (s *txnState) notify() {
	for i := range s.tables {
		for _, t := range s.tables[i].txns {
			if t != nil {
				t.Notify()
			}
		}
	}
}

// txnGuard holds what is needed to release a WriteTxn's locks without
// referencing the WriteTxn or its state, so that a dropped transaction can
// be garbage collected and reported: its finalizer runs when the state
// that owns it becomes unreachable. It holds no pointer into itself or to
// the state (the tables are an array, not a slice of it): a finalizer on
// an object in a cycle may never run.
type txnGuard struct {
	db    *DB
	metas [guardTables]*tableMeta // the locked tables, in lock order...
	n     int
	more  []*tableMeta // ...or all of them here, when there are more
	pc    [1]uintptr   // the caller of DB.WriteTxn
	// held is set while the tables' locks are held for a transaction.
	held bool
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

// hold records that the locks of the listed tables of db are held.
func (g *txnGuard) hold(db *DB) {
	g.db = db
	g.held = true
}

// release unlocks the tables, in reverse lock order.
func (g *txnGuard) release() {
	g.held = false
	list := g.list()
	for i := len(list) - 1; i >= 0; i-- {
		list[i].lock.Unlock()
	}
}

// reset empties the guard for the next transaction.
func (g *txnGuard) reset() {
	clear(g.metas[:g.n])
	g.n, g.more, g.db, g.held = 0, nil, nil, false
}

// dropped runs when a WriteTxn's state became unreachable. If it still
// held locks, the transaction was never finished: it is reported (with
// where it was created) and its locks are released.
func (g *txnGuard) dropped() {
	if !g.held {
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
	g.release()
}
