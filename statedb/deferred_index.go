package statedb

import (
	"bytes"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/steadystate/steadystate/index"
)

// Deferred index writes. A write updates the primary index at once (it
// answers the writes' own lookups and compare-and-swaps) and records
// itself in its table's log of writes: the non-unique secondary indexes
// (a status index, an LPM index) are brought up to date from that log when
// something reads them, when the log is long, or at Commit. Each index
// replays the log on its own, into its own tree, so a commit that wrote
// many objects replays its indexes in parallel, the revision index's
// pending writes with them (a start's commit of 50,000 routes wrote its
// primary, revision, status and LPM indexes one after the other, each
// object four times, on one core). Unique secondary indexes are written
// at once: every write checks them (checkUnique).
//
// A replay does what the write would have done then: objects are
// immutable, so the keys of the old and the new object are the same
// later, and one index's writes go in in the order they were made.

// secWrite is one recorded write: the stored object it replaced (old, if
// hadOld) and the one it stored (new, if hasNew; a delete stores none).
type secWrite struct {
	pk             index.Key
	old, new       object
	hadOld, hasNew bool
}

// keyScratch holds the buffers a replay builds tree keys in: each
// goroutine that replays has its own.
type keyScratch struct {
	scratch []byte
	bufs    [2][]byte
}

// secLogMax is the longest log kept before the indexes are brought up to
// date: it bounds the log's memory (64 bytes a write) in a huge
// transaction.
const secLogMax = 1 << 16

// logChunk is how many writes a chunk of the log holds: the log grows a
// chunk at a time, never copied (a slice grown by append copied itself
// over and over: 15 MB allocated for a log of 3 MB).
const logChunk = 1024

// keepChunks is how many empty chunks a finished transaction's state
// keeps for the next.
const keepChunks = 4

// writeLog is the log of writes, in chunks.
type writeLog struct {
	chunks [][]secWrite
	n      int
}

func (l *writeLog) add(w secWrite) {
	if l.n == len(l.chunks)*logChunk {
		l.chunks = append(l.chunks, make([]secWrite, logChunk))
	}
	l.chunks[l.n/logChunk][l.n%logChunk] = w
	l.n++
}

// each calls f on the writes from index from on, in order.
func (l *writeLog) each(from int, f func(w *secWrite)) {
	for i := from; i < l.n; {
		c := l.chunks[i/logChunk]
		end := min(len(c), l.n-i/logChunk*logChunk)
		for j := i % logChunk; j < end; j++ {
			f(&c[j])
		}
		i = i/logChunk*logChunk + end
	}
}

// reset empties the log, dropping its objects, and keeps a few chunks.
func (l *writeLog) reset() {
	for i := 0; i*logChunk < l.n; i++ {
		clear(l.chunks[i])
	}
	if len(l.chunks) > keepChunks {
		clear(l.chunks[keepChunks:])
		l.chunks = l.chunks[:keepChunks]
	}
	l.n = 0
}

// parallelReplayAbove is the least work (writes to replay, summed over
// the indexes) that a flush spreads over goroutines; less is replayed
// by the caller. A variable, so that tests replay small logs in parallel.
var parallelReplayAbove atomic.Int64

func init() { parallelReplayAbove.Store(4096) }

// asyncReplayAt is the number of writes not yet replayed at which a
// transaction hands them to goroutines of its own (see asyncReplay),
// which replay them into the deferred indexes while the writer goes on
// (one such replay at a time; the next waits until it is done and
// asyncReplayAt more writes came). 2,048 rather than 8,192: a start's
// first list of 10,000 routes reached 8,192 writes near its end, and its
// commit then waited, one core idle, for the replays. A variable, so
// that tests replay small logs so too.
var asyncReplayAt atomic.Int64

func init() { asyncReplayAt.Store(2048) }

// record logs a write for the deferred indexes.
func (tt *txnTable) record(w secWrite) {
	tt.secLog.add(w)
	switch {
	case tt.secLog.n >= secLogMax:
		tt.waitReplay()
		flushDeferred([]*txnTable{tt})
	case tt.secLog.n-tt.secAsync >= int(asyncReplayAt.Load()) && runtime.GOMAXPROCS(0) > 1:
		tt.startReplay()
	}
}

// asyncReplay is a replay running on goroutines of its own: one less
// than GOMAXPROCS (the writer has the other core), each taking the next
// index not taken yet. The indexes' trees are apart: a table of a status
// index and an LPM index replays them on as many cores as it has beside
// the writer. (One goroutine replaying them in
// turn, from 8,192 writes on, left a core idle through most of a start's
// commit while its writer went on.)
type asyncReplay struct {
	done     chan struct{} // closed when every goroutine ended
	running  atomic.Int32
	next     atomic.Int32 // the next index (of todo) to take
	mu       sync.Mutex
	panicked any // the first panic of a goroutine
	// cancelled is set when the transaction ends without a Commit: the
	// replay stops at its next chunk (its trees are thrown away).
	cancelled atomic.Bool
}

// startReplay replays the writes logged so far on goroutines of its own
// (see asyncReplay), unless a replay still runs. Until waitReplay, the writer touches
// neither the deferred indexes' trees nor secDone: every read of a
// deferred index, a flush, Commit and Abort wait first.
func (tt *txnTable) startReplay() {
	if tt.async != nil {
		select {
		case <-tt.async.done:
			if tt.async.panicked != nil {
				// Raised by the next read of an index or the Commit,
				// not by this write.
				return
			}
			tt.async = nil
		default:
			return // still running
		}
	}
	var positions [inlineIndexes]int
	todo := positions[:0]
	for pos, d := range tt.entry.meta.deferred {
		if d && tt.secDone[pos] < tt.secLog.n {
			tt.txn(pos) // opened here: the goroutines only read tt.txns
			todo = append(todo, pos)
		}
	}
	if len(todo) == 0 {
		return
	}
	workers := min(len(todo), max(runtime.GOMAXPROCS(0)-1, 1))
	for len(tt.asyncKeys) < workers {
		tt.asyncKeys = append(tt.asyncKeys, &keyScratch{})
	}
	upTo := tt.secLog.n
	tt.secAsync = upTo
	// The chunks the goroutines read, as they are now: the writer may
	// grow the list of chunks meanwhile, never change a full one.
	log := writeLog{chunks: slices.Clone(tt.secLog.chunks[:(upTo+logChunk-1)/logChunk]), n: upTo}
	a := &asyncReplay{done: make(chan struct{})}
	a.running.Store(int32(workers))
	tt.async = a
	replay := func(pos int, ks *keyScratch) {
		// A chunk at a time, so that an Abort need not wait for the
		// rest (cancelled).
		from := tt.secDone[pos]
		for from < upTo && !a.cancelled.Load() {
			end := min(from/logChunk*logChunk+logChunk, upTo)
			part := writeLog{chunks: log.chunks, n: end}
			tt.entry.meta.replayIndex(tt.txns[pos], pos, &part, from, ks)
			from = end
		}
		tt.secDone[pos] = from // upTo, unless cancelled
	}
	for w := range workers {
		ks := tt.asyncKeys[w]
		go func() {
			defer func() {
				if p := recover(); p != nil {
					a.mu.Lock()
					if a.panicked == nil {
						a.panicked = p
					}
					a.mu.Unlock()
				}
				if a.running.Add(-1) == 0 {
					close(a.done)
				}
			}()
			for {
				k := int(a.next.Add(1) - 1)
				if k >= len(todo) {
					return
				}
				replay(todo[k], ks)
			}
		}()
	}
}

// waitReplay waits for the replay on goroutines of its own, if any, and
// raises its first panic on the caller's.
func (tt *txnTable) waitReplay() {
	a := tt.async
	if a == nil {
		return
	}
	<-a.done
	tt.async = nil
	if a.panicked != nil {
		panic(a.panicked)
	}
}

// pendingFor tells whether index pos has writes to replay.
func (tt *txnTable) pendingFor(pos int) bool {
	return tt.secLog.n > 0 && tt.entry.meta.deferred[pos] && tt.secDone[pos] < tt.secLog.n
}

// flushIndex brings index pos up to date (before a read of it).
func (tt *txnTable) flushIndex(pos int) {
	if tt.async != nil && tt.entry.meta.deferred[pos] {
		tt.waitReplay()
	}
	if !tt.pendingFor(pos) {
		return
	}
	tt.replay(pos, &tt.keys)
	tt.trimLog()
}

// replay replays the writes that index pos has not seen; ks are the
// caller's buffers. tt.txn(pos) must exist if other goroutines replay
// other indexes of tt meanwhile.
func (tt *txnTable) replay(pos int, ks *keyScratch) {
	tt.entry.meta.replayIndex(tt.txn(pos), pos, &tt.secLog, tt.secDone[pos], ks)
	tt.secDone[pos] = tt.secLog.n
}

// trimLog empties the log once every deferred index has replayed it.
func (tt *txnTable) trimLog() {
	for pos, d := range tt.entry.meta.deferred {
		if d && tt.secDone[pos] < tt.secLog.n {
			return
		}
	}
	tt.secLog.reset() // no object held past its replay
	clear(tt.secDone)
	tt.secAsync = 0
}

// clearLog drops the log of an aborted or finished transaction; a
// replay still running is waited for (its panic is not raised: the
// transaction ends anyway).
func (tt *txnTable) clearLog() {
	if a := tt.async; a != nil {
		a.cancelled.Store(true)
		<-a.done
		tt.async = nil
	}
	tt.secLog.reset()
	clear(tt.secDone)
	tt.secAsync = 0
}

// replayTask is one index of one table to bring up to date; pos -1 is the
// revision index's pending writes.
type replayTask struct {
	tt  *txnTable
	pos int
}

// flushDeferred brings every deferred index of tables up to date, and
// their revision indexes: in parallel, one index per goroutine, when the
// work is large enough.
func flushDeferred(tables []*txnTable) {
	var buf [8]replayTask
	tasks := buf[:0]
	work := 0
	for _, tt := range tables {
		tt.waitReplay()
	}
	for _, tt := range tables {
		if n := max(len(tt.revPending), len(tt.revRemoved)); n > 0 {
			tasks = append(tasks, replayTask{tt, -1})
			work += n
		}
		for pos := range tt.entry.meta.deferred {
			if tt.pendingFor(pos) {
				tasks = append(tasks, replayTask{tt, pos})
				work += tt.secLog.n - tt.secDone[pos]
			}
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(tasks))
	if workers <= 1 || work < int(parallelReplayAbove.Load()) {
		for _, task := range tasks {
			task.run(&task.tt.keys)
		}
	} else {
		// Every tree transaction is opened here, before any goroutine
		// reads tt.txns.
		for _, task := range tasks {
			if task.pos < 0 {
				task.tt.txn(task.tt.entry.meta.revisionIndex())
			} else {
				task.tt.txn(task.pos)
			}
		}
		runParallel(slices.Clone(tasks), workers) // tasks stays on the stack
	}
	for _, tt := range tables {
		tt.trimLog()
	}
}

// run does task with the buffers ks.
func (task replayTask) run(ks *keyScratch) {
	if task.pos < 0 {
		task.tt.revFlush()
		return
	}
	task.tt.replay(task.pos, ks)
}

// runParallel runs tasks on workers goroutines, the caller's one of
// them, and returns when all are done. A panic in a task is raised again
// in the caller, once every goroutine has stopped.
func runParallel(tasks []replayTask, workers int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var panicked any
	work := func(ks *keyScratch) {
		defer func() {
			if p := recover(); p != nil {
				mu.Lock()
				if panicked == nil {
					panicked = p
				}
				mu.Unlock()
			}
		}()
		for {
			i := int(next.Add(1) - 1)
			if i >= len(tasks) {
				return
			}
			tasks[i].run(ks)
		}
	}
	for range workers - 1 {
		wg.Go(func() { work(&keyScratch{}) })
	}
	work(&tasks[0].tt.keys)
	wg.Wait()
	if panicked != nil {
		panic(panicked)
	}
}

// replayLog writes the logged writes of log from index from on into itxn, the tree
// transaction of deferred index pos, as write and removeIndexed would
// have.
func (t *table[Obj]) replayLog(itxn *treeTxn, pos int, log *writeLog, from int, ks *keyScratch) {
	idx := t.secondary[pos-1]
	appendKey := t.appendKey[pos-1]
	log.each(from, func(w *secWrite) {
		pk := w.pk
		var newObj, oldObj Obj
		if w.hasNew {
			newObj = t.obj(w.new)
		}
		if w.hadOld {
			oldObj = t.obj(w.old)
		}
		if appendKey != nil {
			var newKey []byte
			hasNew := false
			if w.hasNew {
				ks.bufs[0], hasNew = appendKey(ks.bufs[0][:0], newObj)
				newKey = ks.bufs[0]
			}
			if w.hadOld {
				oldKey, hasOld := appendKey(ks.bufs[1][:0], oldObj)
				ks.bufs[1] = oldKey
				if hasOld && (!hasNew || !bytes.Equal(oldKey, newKey)) {
					ks.scratch = appendNonUnique(ks.scratch[:0], oldKey, pk)
					itxn.Delete(ks.scratch)
				}
			}
			if hasNew {
				ks.scratch = appendNonUnique(ks.scratch[:0], newKey, pk)
				itxn.InsertCopy(ks.scratch, w.new)
			}
			return
		}
		var newKeys index.KeySet
		if w.hasNew {
			newKeys = idx.fromObject(newObj)
		}
		if w.hadOld {
			idx.fromObject(oldObj).Foreach(func(k index.Key) {
				if !w.hasNew || !hasKey(newKeys, k) {
					ks.scratch = appendNonUnique(ks.scratch[:0], k, pk)
					itxn.Delete(ks.scratch)
				}
			})
		}
		if w.hasNew {
			newKeys.Foreach(func(k index.Key) {
				ks.scratch = appendNonUnique(ks.scratch[:0], k, pk)
				itxn.InsertCopy(ks.scratch, w.new)
			})
		}
	})
}
