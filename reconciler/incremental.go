package reconciler

import (
	"context"
	"time"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/statedb"
)

// incremental reconciles the changes since the last call in rounds of at
// most IncrementalRoundSize objects and returns the channel that closes
// when there are more.
//
// Only Pending and Refreshing objects are updated; Done and Error objects
// are the reconciler's own status writes (or need no work) and are skipped,
// which is what keeps status writes from causing further Updates (the
// package doc's "Status writes cause no work").
func (r *reconciler[Obj]) incremental(ctx context.Context, changes statedb.ChangeIterator[Obj]) <-chan struct{} {
	txn := r.db.ReadTxn()
	seq, watch := changes.Next(txn)
	round := r.round[:0]
	for change := range seq {
		if change.Deleted {
			round = append(round, work[Obj]{obj: change.Object, rev: change.Revision, deleted: true})
		} else if r.cfg.GetObjectStatus(change.Object).IsPending() {
			round = append(round, work[Obj]{obj: change.Object, rev: change.Revision})
		} else {
			continue
		}
		if len(round) >= r.cfg.IncrementalRoundSize {
			r.processRound(ctx, txn, round, false)
			round = round[:0]
			if ctx.Err() != nil {
				return watch
			}
			// Retries that fell due meanwhile go between rounds, so a long
			// burst of changes does not hold them back.
			r.processRetries(ctx)
		}
	}
	if len(round) > 0 {
		r.processRound(ctx, txn, round, false)
	}
	clear(round)
	r.round = round[:0]
	if ctx.Err() == nil {
		r.setReached(r.cfg.Table.Revision(txn))
	}
	return watch
}

// processRound applies a round to the target, then writes the statuses back
// in one write transaction. A status is written with CompareAndSwap at the
// revision that was reconciled, so an object that changed meanwhile keeps
// its newer version (which the change feed delivers next). With refresh
// (full reconciliation) a success writes nothing: the object is Done
// already.
func (r *reconciler[Obj]) processRound(ctx context.Context, txn statedb.ReadTxn, round []work[Obj], refresh bool) {
	oc := opContext{parent: ctx, timeout: r.cfg.OperationTimeout}
	r.apply(&oc, txn, round, refresh)
	oc.stop()
	if ctx.Err() != nil {
		// Shutting down: the outcome may be the cancellation itself.
		return
	}

	now := time.Now()
	done := Status{Kind: StatusKindDone, UpdatedAt: now}
	tracking := r.retries.len() > 0 || len(r.terminal) > 0
	var wtxn statedb.WriteTxn
	for i := range round {
		w := &round[i]
		if w.err == nil {
			if tracking {
				r.forget(r.keyOf(w))
			}
			if w.deleted || refresh {
				continue
			}
			if wtxn == nil {
				wtxn = r.db.WriteTxn(r.cfg.Table)
			}
			r.writeStatus(wtxn, w, done)
			continue
		}
		key := r.keyOf(w)
		r.noteFailure(key, w.obj)
		if !w.deleted && IsTerminal(w.err) {
			r.retries.remove(key)
			r.terminal[key] = w.err
		} else {
			delete(r.terminal, key)
			r.retries.add(&retryItem[Obj]{
				key: key, obj: w.obj, rev: w.rev, deleted: w.deleted,
				attempts: w.attempts + 1, err: w.err,
				at: now.Add(backoff(w.attempts+1, r.cfg.RetryBackoffMin, r.cfg.RetryBackoffMax)),
			})
		}
		if !w.deleted {
			if wtxn == nil {
				wtxn = r.db.WriteTxn(r.cfg.Table)
			}
			r.writeStatus(wtxn, w, Status{Kind: StatusKindError, UpdatedAt: now, Error: w.err.Error()})
		}
	}
	if wtxn != nil {
		wtxn.Commit()
	}
}

// writeStatus writes st into a clone of w's object if the object is still
// at the revision that was reconciled. Otherwise the error
// (ErrRevisionNotEqual, ErrObjectNotFound) is expected and ignored: a newer
// version or a delete is on its way through the change feed.
func (r *reconciler[Obj]) writeStatus(wtxn statedb.WriteTxn, w *work[Obj], st Status) {
	obj := r.cfg.SetObjectStatus(r.cfg.CloneObject(w.obj), st)
	r.cfg.Table.CompareAndSwap(wtxn, w.rev, obj)
}

// apply runs the round's operations, as batches if the target supports them.
func (r *reconciler[Obj]) apply(oc *opContext, txn statedb.ReadTxn, round []work[Obj], refresh bool) {
	updateOp := OpUpdate
	if refresh {
		updateOp = OpRefresh
	}
	if r.batch == nil {
		for i := range round {
			w := &round[i]
			if w.deleted {
				w.err = r.delete(oc.get(), txn, w.obj)
			} else {
				w.err = r.update(oc.get(), txn, w.obj, updateOp)
			}
		}
		return
	}
	var updates, deletes []BatchEntry[Obj]
	var updateIdx, deleteIdx []int
	for i := range round {
		w := &round[i]
		if w.deleted {
			deletes = append(deletes, BatchEntry[Obj]{Object: w.obj, Revision: w.rev})
			deleteIdx = append(deleteIdx, i)
		} else {
			updates = append(updates, BatchEntry[Obj]{Object: w.obj, Revision: w.rev})
			updateIdx = append(updateIdx, i)
		}
	}
	if len(deletes) > 0 {
		r.batchOp(oc.get(), txn, OpDelete, deletes)
		for j, i := range deleteIdx {
			round[i].err = deletes[j].Result
		}
	}
	if len(updates) > 0 {
		r.batchOp(oc.get(), txn, updateOp, updates)
		for j, i := range updateIdx {
			round[i].err = updates[j].Result
		}
	}
}

// keyOf returns (and caches) the primary key of w's object as a string.
func (r *reconciler[Obj]) keyOf(w *work[Obj]) string {
	if w.key == "" {
		w.key = string(r.cfg.Table.PrimaryKey(w.obj))
	}
	return w.key
}

// forget drops every record of failure of key: it succeeded.
func (r *reconciler[Obj]) forget(key string) {
	r.retries.remove(key)
	delete(r.terminal, key)
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
		case !it.deleted && found && r.cfg.GetObjectStatus(cur).Kind == StatusKindError:
			round = append(round, work[Obj]{obj: cur, rev: rev, key: it.key, attempts: it.attempts})
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
