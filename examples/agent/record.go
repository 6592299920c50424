package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// recorded wraps a reconciler's target so that the state record's
// applied/TABLE bucket holds what the target applied: an object is put
// after its Update succeeded, removed after its Delete succeeded, and a
// Prune that succeeded deletes (with the target's Delete) and forgets what
// the record holds but is no longer desired, so that a restarted agent
// removes what an earlier run applied even without ownership marks. A failure
// to record is the operation's error (retried), so the record never
// misses an object the reconciler counts as Done. A kernel-marked target
// (kernelMarked: routes) is not recorded at all. The wrapper keeps the
// target's optional interfaces (reconciler.Planner with
// reconciler.BatchPlanner, reconciler.BatchTarget; reconciler.DriftTarget
// is always forwarded): see recordTarget.
type recorded[Obj any] struct {
	inner  reconciler.Target[Obj]
	rec    *stateRecord
	table  string
	bucket []byte
	key    func(Obj) index.Key
	strip  func(Obj) Obj // the object without its status: what is recorded
	log    *slog.Logger  // "Removed" lines, after the delete succeeded
	// marked: the kernel marks the target's objects as its own (see
	// kernelMarked): nothing is recorded, and the record an earlier
	// version kept of the table is dropped by the first prune (dropped).
	marked  bool
	dropped atomic.Bool
}

// kernelMarked is a target whose objects the kernel marks as the
// target's own, when KernelMarksOwned says so: the routes target, whose
// routes carry its protocol number (rtm_protocol). Its Prune finds what an
// earlier run applied by that mark alone, and its Delete can only remove a
// route of its own protocol, so a record of what it applied would change
// nothing the agent does: the agent keeps none for it. At 50,000 routes
// that record cost a start 0.1-0.2 s of CPU (encoding, checking and
// writing 50,000 entries) and some 16 MB at its peak, and a restart a walk
// of 50,000 records.
type kernelMarked interface{ KernelMarksOwned() bool }

// recordTarget wraps inner (see recorded) for table, keeping whichever of
// Planner and BatchTarget inner implements. Objects are recorded as strip
// makes them (without their status, so that an object applied again
// unchanged, as after a restart, is recorded already and costs no write;
// nil: as they are). It logs each object removed once its delete
// succeeded (at Debug in a batch of more than smallChangeSet).
func recordTarget[Obj any](inner reconciler.Target[Obj], rec *stateRecord, table string, key func(Obj) index.Key, strip func(Obj) Obj, log *slog.Logger) reconciler.Target[Obj] {
	if strip == nil {
		strip = func(o Obj) Obj { return o }
	}
	r := &recorded[Obj]{inner: inner, rec: rec, table: table, bucket: appliedBucket(table), key: key, strip: strip, log: log}
	if m, ok := inner.(kernelMarked); ok {
		r.marked = m.KernelMarksOwned()
	}
	p, isPlanner := inner.(reconciler.Planner[Obj])
	b, isBatch := inner.(reconciler.BatchTarget[Obj])
	switch {
	case isPlanner && isBatch:
		return &recordedPlannerBatch[Obj]{r, planner[Obj]{p}, batcher[Obj]{r, b}}
	case isPlanner:
		return &recordedPlanner[Obj]{r, planner[Obj]{p}}
	case isBatch:
		return &recordedBatch[Obj]{r, batcher[Obj]{r, b}}
	}
	return r
}

type (
	recordedPlanner[Obj any] struct {
		*recorded[Obj]
		planner[Obj]
	}
	recordedBatch[Obj any] struct {
		*recorded[Obj]
		batcher[Obj]
	}
	recordedPlannerBatch[Obj any] struct {
		*recorded[Obj]
		planner[Obj]
		batcher[Obj]
	}
)

// Update implements reconciler.Target.
func (r *recorded[Obj]) Update(ctx context.Context, txn statedb.ReadTxn, obj Obj) error {
	if err := r.rec.ready(ctx); err != nil {
		return err
	}
	if err := r.inner.Update(ctx, txn, obj); err != nil {
		return err
	}
	return r.record([]Obj{obj}, nil)
}

// Delete implements reconciler.Target.
func (r *recorded[Obj]) Delete(ctx context.Context, txn statedb.ReadTxn, obj Obj) error {
	if err := r.rec.ready(ctx); err != nil {
		return err
	}
	if err := r.inner.Delete(ctx, txn, obj); err != nil {
		return err
	}
	r.log.Info("Removed " + describe(obj))
	return r.record(nil, []Obj{obj})
}

// Prune implements reconciler.Target.
func (r *recorded[Obj]) Prune(ctx context.Context, txn statedb.ReadTxn, desired iter.Seq2[Obj, statedb.Revision]) error {
	if err := r.rec.ready(ctx); err != nil {
		return err
	}
	if r.marked {
		if err := r.inner.Prune(ctx, txn, desired); err != nil {
			return err
		}
		if !r.dropped.Load() {
			// What the target owns is pruned by its mark: a record an
			// earlier version of the agent kept of it is of no use.
			if err := r.rec.dropBucket(r.bucket); err != nil {
				return fmt.Errorf("dropping the record of %s in %s: %w", r.table, r.rec.dir, err)
			}
			r.dropped.Store(true)
		}
		return nil
	}
	keep := map[string]bool{}
	complete := false
	seen := func(yield func(Obj, statedb.Revision) bool) {
		for obj, rev := range desired {
			keep[string(r.key(obj))] = true
			if !yield(obj, rev) {
				return
			}
		}
		complete = true
	}
	if err := r.inner.Prune(ctx, txn, seen); err != nil || !complete {
		return err
	}
	// What an earlier run applied and is no longer desired goes too, also
	// where the target cannot recognise it as its own: each such object is
	// deleted with the target's Delete (idempotent: a no-op for what the
	// Prune removed already) before its record goes. A failed Delete keeps
	// its record for the next prune.
	var errs []error
	stale, err := r.rec.appliedExcept(r.table, keep)
	if err != nil {
		return fmt.Errorf("reading the record in %s: %w", r.rec.dir, err)
	}
	var gone []Obj
	for k, v := range stale {
		var obj Obj
		if err := json.Unmarshal(v, &obj); err != nil {
			errs = append(errs, fmt.Errorf("recorded object %q: %w", k, err))
			continue
		}
		if err := r.inner.Delete(ctx, txn, obj); err != nil {
			errs = append(errs, fmt.Errorf("removing %s, applied by an earlier run: %w", describe(obj), err))
			continue
		}
		r.log.Info("Removed " + describe(obj) + " (applied by an earlier run, no longer desired)")
		gone = append(gone, obj)
	}
	return errors.Join(append(errs, r.record(nil, gone))...)
}

// record puts applied and removes deleted, in one transaction. Objects
// the record holds already as they are (a restart's first round, a
// refresh) are left out, and with nothing else to do there is no write
// transaction (and no sync) at all.
func (r *recorded[Obj]) record(applied, deleted []Obj) error {
	if r.marked || len(applied) == 0 && len(deleted) == 0 {
		return nil
	}
	puts, err := r.prepare(applied)
	if err != nil {
		return err
	}
	return r.write(puts, deleted)
}

// recordPut is a put of the record: an object's key and recorded form,
// and where the object is in the objects given to prepare.
type recordPut struct {
	k, v []byte
	i    int
}

// prepare returns the puts that make the record hold objs, in key order,
// leaving out those it holds already as they are. It needs no outcome of
// the target's operation, so that a batch's can be worked out while the
// target applies it (see batcher.UpdateBatch).
func (r *recorded[Obj]) prepare(objs []Obj) ([]recordPut, error) {
	if len(objs) == 0 {
		return nil, nil
	}
	puts := make([]recordPut, 0, len(objs))
	for i, obj := range objs {
		v, err := json.Marshal(r.strip(obj))
		if err != nil {
			return nil, fmt.Errorf("recording %s: %w", describe(obj), err)
		}
		puts = append(puts, recordPut{r.key(obj), v, i})
	}
	// In key order: bbolt inserts into (and deletes from) a node in memory
	// until the commit, so unsorted puts cost a copy of the node each (a
	// round of 50,000: seconds), sorted ones an append. And the record is
	// read in one pass of a cursor.
	slices.SortFunc(puts, func(a, b recordPut) int { return bytes.Compare(a.k, b.k) })
	err := r.rec.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(r.bucket)
		if b == nil {
			return nil
		}
		n := 0
		c := b.Cursor()
		var k, v []byte
		for i, p := range puts {
			// The next key recorded at or after p's: a few steps on from
			// the last, else a seek.
			steps := 0
			for i > 0 && k != nil && bytes.Compare(k, p.k) < 0 && steps < cursorSteps {
				k, v = c.Next()
				steps++
			}
			if i == 0 || k != nil && bytes.Compare(k, p.k) < 0 {
				k, v = c.Seek(p.k)
			}
			if !bytes.Equal(k, p.k) || !bytes.Equal(v, p.v) {
				puts[n] = p
				n++
			}
		}
		puts = puts[:n]
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the record in %s: %w", r.rec.dir, err)
	}
	return puts, nil
}

// prepareRecovered is prepare with a panic (of strip or key) as its
// error: as a panic of the target's operation, the failure of the objects
// to record, logged with its stack as the reconciler logs a target's.
func (r *recorded[Obj]) prepareRecovered(objs []Obj) (puts []recordPut, err error) {
	defer func() {
		if v := recover(); v != nil {
			puts, err = nil, fmt.Errorf("panic while recording: %v", v)
			r.log.Error("Recording panicked", "table", r.table, "panic", v, "stack", string(debug.Stack()))
		}
	}()
	return r.prepare(objs)
}

// write puts puts (in key order) and removes deleted, in one transaction;
// with nothing to do, there is no transaction.
func (r *recorded[Obj]) write(puts []recordPut, deleted []Obj) error {
	if len(puts) == 0 && len(deleted) == 0 {
		return nil
	}
	err := r.rec.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(r.bucket)
		if err != nil {
			return err
		}
		// The puts are in key order: pages filled to 90%, not bbolt's
		// default half (for random inserts), nearly halve a large round's
		// pages in memory and on disk.
		b.FillPercent = recordFill
		for _, p := range puts {
			if err := b.Put(p.k, p.v); err != nil {
				return err
			}
		}
		dels := make([][]byte, len(deleted))
		for i, obj := range deleted {
			dels[i] = r.key(obj)
		}
		slices.SortFunc(dels, bytes.Compare)
		for _, k := range dels {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("recording in %s: %w", r.rec.dir, err)
	}
	return nil
}

// recordFill is the record buckets' bbolt FillPercent for a batch of puts
// in key order.
const recordFill = 0.9

// cursorSteps is how many records the check of a batch against the record
// steps over before it seeks instead: a restart's round of every object
// walks the record once.
const cursorSteps = 8

// WatchDrift implements reconciler.DriftTarget: the inner target's watch,
// if it has one; otherwise it waits for ctx (drift is then found by the
// refresh by age alone).
func (r *recorded[Obj]) WatchDrift(ctx context.Context, drift reconciler.Drift) error {
	if d, ok := r.inner.(reconciler.DriftTarget[Obj]); ok {
		return d.WatchDrift(ctx, drift)
	}
	<-ctx.Done()
	return nil
}

// planner forwards reconciler.Planner and reconciler.BatchPlanner: a plan
// changes nothing, so there is nothing to record.
type planner[Obj any] struct{ p reconciler.Planner[Obj] }

// PlanUpdateBatch implements reconciler.BatchPlanner: the inner target's
// batch plan, or PlanUpdate per entry if it has none.
func (p planner[Obj]) PlanUpdateBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.PlanEntry[Obj]) {
	if bp, ok := p.p.(reconciler.BatchPlanner[Obj]); ok {
		bp.PlanUpdateBatch(ctx, txn, batch)
		return
	}
	for i := range batch {
		batch[i].Plan, batch[i].Result = p.p.PlanUpdate(ctx, txn, batch[i].Object)
	}
}

func (p planner[Obj]) PlanUpdate(ctx context.Context, txn statedb.ReadTxn, obj Obj) (reconciler.Plan, error) {
	return p.p.PlanUpdate(ctx, txn, obj)
}

func (p planner[Obj]) PlanDelete(ctx context.Context, txn statedb.ReadTxn, obj Obj) (reconciler.Plan, error) {
	return p.p.PlanDelete(ctx, txn, obj)
}

func (p planner[Obj]) PlanPrune(ctx context.Context, txn statedb.ReadTxn, desired iter.Seq2[Obj, statedb.Revision]) (reconciler.Plan, error) {
	return p.p.PlanPrune(ctx, txn, desired)
}

// batcher forwards reconciler.BatchTarget and records the entries that
// succeeded, in one transaction per batch; an entry whose record fails
// gets that error.
type batcher[Obj any] struct {
	r *recorded[Obj]
	b reconciler.BatchTarget[Obj]
}

func (b batcher[Obj]) UpdateBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[Obj]) {
	if b.notReady(ctx, batch) {
		return
	}
	if b.r.marked {
		b.b.UpdateBatch(ctx, txn, batch)
		return
	}
	// The record's puts need no outcome: they are worked out (encoded,
	// sorted, checked against the record) while the target applies the
	// batch, on the other core, and only the write waits for the outcome:
	// the record of a start's 50,000 routes, 105-150 ms after the netlink
	// writes, now takes 45-57 ms after them.
	objs := make([]Obj, len(batch))
	for i := range batch {
		objs[i] = batch[i].Object
	}
	type prepared struct {
		puts []recordPut
		err  error
	}
	ready := make(chan prepared, 1)
	waited := false
	defer func() {
		// A panic of the target leaves only after the goroutine (not
		// recovered here: the reconciler's recover sees the target's
		// stack), so that nothing of the operation outlives it.
		if !waited {
			<-ready
		}
	}()
	go func() {
		var p prepared
		p.puts, p.err = b.r.prepareRecovered(objs)
		ready <- p
	}()
	b.b.UpdateBatch(ctx, txn, batch)
	p := <-ready
	waited = true
	puts, err := p.puts[:0], p.err
	if err == nil {
		// What the target applied.
		for _, put := range p.puts {
			if batch[put.i].Result == nil {
				puts = append(puts, put)
			}
		}
	} else {
		// What could not be recorded may be an object the target failed:
		// only what it applied must be, as when the record was worked out
		// after the outcome.
		var applied []Obj
		for _, e := range batch {
			if e.Result == nil {
				applied = append(applied, e.Object)
			}
		}
		puts, err = b.r.prepareRecovered(applied)
	}
	if err == nil {
		err = b.r.write(puts, nil)
	}
	b.failApplied(batch, err)
}

func (b batcher[Obj]) DeleteBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[Obj]) {
	if b.notReady(ctx, batch) {
		return
	}
	b.b.DeleteBatch(ctx, txn, batch)
	var gone []Obj
	for _, e := range batch {
		if e.Result == nil {
			gone = append(gone, e.Object)
		}
	}
	level := slog.LevelInfo
	if len(gone) > smallChangeSet {
		level = slog.LevelDebug
	}
	for _, obj := range gone {
		b.r.log.Log(context.Background(), level, "Removed "+describe(obj))
	}
	b.failApplied(batch, b.r.record(nil, gone))
}

// notReady waits for the record (see stateRecord), or ctx, and, if it could not
// be opened, makes that the outcome of every entry of batch, which is not
// applied.
func (b batcher[Obj]) notReady(ctx context.Context, batch []reconciler.BatchEntry[Obj]) bool {
	err := b.r.rec.ready(ctx)
	if err != nil {
		for i := range batch {
			batch[i].Result = err
		}
	}
	return err != nil
}

// failApplied makes err, a failure to record, the outcome of every entry
// of batch that the target applied: it is retried, so that the record
// never misses an object counted as Done.
func (b batcher[Obj]) failApplied(batch []reconciler.BatchEntry[Obj], err error) {
	if err == nil {
		return
	}
	for i := range batch {
		if batch[i].Result == nil {
			batch[i].Result = err
		}
	}
}
