package reconciler

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/statedb"
)

// incremental reconciles the changes since the last call in rounds of at
// most IncrementalRoundSize objects and returns the channel that closes
// when there are more, and whether it had anything to do.
//
// Only Pending and Refreshing objects are updated; Done and Error objects
// are the reconciler's own status writes (or need no work) and are skipped,
// which is what keeps status writes from causing further Updates (the
// package doc's "Status writes cause no work").
func (r *reconciler[Obj]) incremental(ctx context.Context, changes statedb.ChangeIterator[Obj]) (watch <-chan struct{}, worked bool) {
	txn := r.db.ReadTxn()
	seq, watch := changes.Next(txn)
	round := r.round[:0]
	// Each revision is one write of one object: the revisions since the
	// last pass and the reconciler's own last status write bound this
	// pass's changes, and a burst's round buffer is made at that size
	// once it has a change to hold, not grown step by step (appending a
	// start's 50,000 objects one by one allocated 26 MB for a buffer of
	// 5.5 MB, while the GC marked the heap).
	rev := r.cfg.Table.Revision(txn)
	hint := 0
	if base := max(r.seen, r.own); rev > base {
		hint = int(min(rev-base, uint64(r.cfg.IncrementalRoundSize)))
	}
	r.seen = rev
	for change := range seq {
		w := work[Obj]{obj: change.Object, rev: change.Revision, deleted: change.Deleted}
		if !change.Deleted && !r.cfg.GetObjectStatus(change.Object).IsPending() {
			continue
		}
		if len(round) == cap(round) && hint > cap(round) {
			round = slices.Grow(round, hint-len(round))
			r.roundsMade.Add(1)
		}
		round = append(round, w)
		if len(round) >= r.cfg.IncrementalRoundSize {
			worked = true
			r.processRound(ctx, txn, round, false)
			clear(round) // its objects are not held until overwritten
			round = round[:0]
			if ctx.Err() != nil {
				return watch, worked
			}
			// Retries that fell due meanwhile go between rounds, so a long
			// burst of changes does not hold them back.
			r.processRetries(ctx)
		}
	}
	if len(round) > 0 {
		worked = true
		r.processRound(ctx, txn, round, false)
	}
	r.round = reuse(round)
	if ctx.Err() == nil {
		r.setReached(rev)
	}
	return watch, worked
}

// keepRound is the largest round buffer kept for the next call: a burst's
// larger one is given back, so that memory follows live data, not the
// largest burst ever reconciled.
const keepRound = DefaultIncrementalRoundSize

// reuse returns round emptied for reuse, or nil if it is larger than
// keepRound.
func reuse[Obj any](round []work[Obj]) []work[Obj] {
	if cap(round) > keepRound {
		return nil
	}
	clear(round[:cap(round)])
	return round[:0]
}

// processRound applies a round to the target, on the executor's workers,
// then writes the statuses back in one write transaction (see
// writeResult). Deletes write nothing; a refresh renews the Done status's
// time, which is the age that RefreshInterval counts from.
func (r *reconciler[Obj]) processRound(ctx context.Context, txn statedb.ReadTxn, round []work[Obj], refresh bool) {
	j := r.newJob(ctx, txn, round, refresh)
	r.exec.execute(j)
	if ctx.Err() != nil {
		// Shutting down: the outcome may be the cancellation itself.
		return
	}

	now := time.Now()
	tracking := r.retries.len() > 0 || len(r.terminal) > 0 || len(r.failures) > 0
	var wtxn statedb.WriteTxn
	for i := range round {
		w := &round[i]
		if w.err == nil {
			if tracking {
				r.succeeded(w)
			}
			if (refresh || w.refresh) && len(w.plan) > 0 {
				r.repaired(w, now)
			}
			if w.deleted {
				continue
			}
		} else {
			r.failedAttempt(w, now, refresh)
			if w.deleted {
				continue
			}
		}
		if wtxn == nil {
			wtxn = r.db.WriteTxn(r.cfg.Table)
		}
		r.writeResult(wtxn, w, now)
	}
	if wtxn != nil {
		r.own = r.cfg.Table.Revision(wtxn.Commit())
	}
	r.endRound()
}

// failedAttempt records that w's operation failed: w goes to the retry
// queue on its backoff, or, failed terminally, waits until it changes. A
// retry keeps what w was (a refresh, its plan, how its drift was found), so
// that drift it repairs is counted when the retry succeeds.
func (r *reconciler[Obj]) failedAttempt(w *work[Obj], now time.Time, refresh bool) {
	key := r.keyOf(w)
	// Failed updates in a row: the object is in Error. A failed delete
	// ends the run (the object is gone from the table).
	if w.deleted {
		delete(r.failures, key)
	} else {
		r.failures[key]++
	}
	r.noteFailure(key, w.obj)
	if !w.deleted && IsTerminal(w.err) {
		r.retries.remove(key)
		r.terminal[key] = w.err
		return
	}
	delete(r.terminal, key)
	r.retries.add(&retryItem[Obj]{
		key: key, obj: w.obj, rev: w.rev, deleted: w.deleted, refresh: refresh || w.refresh,
		plan: w.plan, found: w.found,
		attempts: w.attempts + 1, err: w.err,
		at: now.Add(retryWait(w.attempts+1, r.cfg.RetryBackoffMin, r.cfg.RetryBackoffMax)),
	})
}

// newJob makes the executor's job of a round: one unit per object, or, for
// a batch target, the deletes and then the updates in batches split evenly
// across the workers. Refreshes of a Planner target that were not planned
// before the round (see check.go) go one object at a time even with a
// batch target, so that each is planned and drift is seen.
func (r *reconciler[Obj]) newJob(ctx context.Context, txn statedb.ReadTxn, round []work[Obj], refresh bool) *job[Obj] {
	j := &job[Obj]{ctx: ctx, txn: txn, round: round, n: len(round), op: OpUpdate}
	if refresh {
		j.op = OpRefresh
	}
	if r.batch == nil || (refresh && r.planner != nil && !allPlanned(round)) {
		return j
	}
	order := make([]int, 0, len(round))
	for i := range round {
		if round[i].deleted {
			order = append(order, i)
		}
	}
	deletes := len(order)
	for i := range round {
		if !round[i].deleted {
			order = append(order, i)
		}
	}
	j.order = order
	j.spans = splitSpans(j.spans, 0, deletes, r.cfg.Workers, true)
	j.spans = splitSpans(j.spans, deletes, len(order), r.cfg.Workers, false)
	j.n = len(j.spans)
	return j
}

// splitSpans appends to spans the batch units that split [lo, hi) evenly
// across up to workers workers.
func splitSpans(spans []span, lo, hi, workers int, deleted bool) []span {
	if hi == lo {
		return spans
	}
	parts := min(workers, hi-lo)
	for p := range parts {
		spans = append(spans, span{lo: lo + (hi-lo)*p/parts, hi: lo + (hi-lo)*(p+1)/parts, deleted: deleted})
	}
	return spans
}

// allPlanned reports whether every object of round was planned before it.
func allPlanned[Obj any](round []work[Obj]) bool {
	for i := range round {
		if !round[i].planned {
			return false
		}
	}
	return len(round) > 0
}

// writeResult writes the outcome of w (Done, or Error with the message) into
// the object's status, if the desired version that was applied is still
// current. The status carries the ID of that version (Status.ID): the
// result is written whenever the stored object's status still has it,
// whatever other reconcilers wrote into the object meanwhile, so none is
// starved by another's status writes. A status without ID falls back to
// the revision: the result is written only if the object is unchanged. In
// both cases an object that a writer changed or deleted meanwhile keeps
// the writer's version, which the change feed delivers next.
func (r *reconciler[Obj]) writeResult(wtxn statedb.WriteTxn, w *work[Obj], now time.Time) {
	worked := r.cfg.GetObjectStatus(w.obj)
	st := worked.result(now, w.err)
	// Most often nothing else wrote the object: swap at its revision.
	_, _, err := r.cfg.Table.CompareAndSwap(wtxn, w.rev, r.cfg.SetObjectStatus(r.cfg.CloneObject(w.obj), st))
	if err == nil || worked.ID == 0 {
		return
	}
	cur, _, found := r.cfg.Table.Get(wtxn, statedb.QueryByPrimaryKey[Obj](r.cfg.Table, index.Key(r.keyOf(w))))
	if !found || r.cfg.GetObjectStatus(cur).ID != worked.ID {
		return
	}
	r.cfg.Table.Insert(wtxn, r.cfg.SetObjectStatus(r.cfg.CloneObject(cur), st))
}

// keyOf returns (and caches) the primary key of w's object as a string.
func (r *reconciler[Obj]) keyOf(w *work[Obj]) string {
	if w.key == "" {
		w.key = string(r.cfg.Table.PrimaryKey(w.obj))
	}
	return w.key
}

// succeeded drops every record of failure of w's object, which leaves
// health with them. An update that ends a run of failures is logged once
// at Info: the object left Error for Done.
func (r *reconciler[Obj]) succeeded(w *work[Obj]) {
	key := r.keyOf(w)
	n := r.failures[key]
	r.forget(key)
	if n == 0 || w.deleted {
		return
	}
	failures := "failures"
	if n == 1 {
		failures = "failure"
	}
	if r.roundLog.recovery() {
		r.cfg.Logger.Info(fmt.Sprintf("Done after %d %s: %s", n, failures, describe(r.cfg.Table, w.obj)), "failures", n)
	}
}

// forget drops every record of failure of key: it succeeded.
func (r *reconciler[Obj]) forget(key string) {
	r.retries.remove(key)
	delete(r.terminal, key)
	delete(r.failures, key)
}

// processRetries retries the failed objects that are due, one round at most.
// An Update is retried with the object as it is now, and only if its status
// is still the Error that the reconciler wrote: a newer version is Pending
// and reconciled through the change feed instead. A Delete is retried
// unless the object was inserted again.
func (r *reconciler[Obj]) processRetries(ctx context.Context) {
	due := r.retries.popDue(time.Now(), r.cfg.IncrementalRoundSize)
	if len(due) == 0 {
		return
	}
	txn := r.db.ReadTxn()
	round := make([]work[Obj], 0, len(due))
	for _, it := range due {
		cur, rev, found := r.cfg.Table.Get(txn, statedb.QueryByPrimaryKey[Obj](r.cfg.Table, index.Key(it.key)))
		switch {
		case it.deleted && !found:
			round = append(round, work[Obj]{obj: it.obj, rev: it.rev, deleted: true, key: it.key, attempts: it.attempts})
		case !it.deleted && found && r.retryable(it, cur):
			round = append(round, work[Obj]{obj: cur, rev: rev, key: it.key, attempts: it.attempts, refresh: it.refresh, plan: it.plan, found: it.found})
		}
	}
	if len(round) > 0 {
		r.processRound(ctx, txn, round, false)
	}
	// Refresh the failing count that WaitUntilReconciled reports: a
	// retried Delete that succeeds (or a retry dropped above) writes
	// nothing to the table, so nothing else would wake the loop to do it.
	r.setReached(0)
}

// retryable tells whether the failed update it is still to be retried with
// the object as it is now, cur: its status is still the Error written for
// the version that failed (a newer version is Pending and goes through the
// change feed instead).
func (r *reconciler[Obj]) retryable(it *retryItem[Obj], cur Obj) bool {
	st := r.cfg.GetObjectStatus(cur)
	return st.Kind == StatusKindError && st.ID == r.cfg.GetObjectStatus(it.obj).ID
}

// opContext hands out the contexts of a round's operations. Creating a
// context with a timeout for every operation would cost more than a no-op
// target's whole Update, so the operations of a round share one deadline,
// renewed whenever less than half of OperationTimeout is left. Each
// operation thus gets between half and all of OperationTimeout: a hung
// operation fails alone and the rest of its round gets a fresh deadline.
type opContext struct {
	parent   context.Context
	timeout  time.Duration
	ctx      context.Context
	cancel   context.CancelFunc
	deadline time.Time
}

func (oc *opContext) get() context.Context {
	if oc.ctx == nil || time.Until(oc.deadline) < oc.timeout/2 {
		oc.stop()
		oc.deadline = time.Now().Add(oc.timeout)
		oc.ctx, oc.cancel = context.WithDeadline(oc.parent, oc.deadline)
	}
	return oc.ctx
}

func (oc *opContext) stop() {
	if oc.cancel != nil {
		oc.cancel()
	}
}
