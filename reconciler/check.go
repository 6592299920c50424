package reconciler

import (
	"context"
	"time"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/statedb"
)

// A check looks for drift in Done objects: the refresh by age of a Planner
// target (refresh.go) and the objects a DriftTarget reported (drift.go).
// It reads before it writes, and writes only what differs:
//
//  1. plan: every object of the round is planned against the real system
//     (PlanUpdate per object, or PlanUpdateBatch per worker with a
//     BatchPlanner), on the executor's workers; nothing is changed;
//  2. mark: in one write transaction, the objects whose plan is not empty
//     become Refreshing (an object being repaired says so, until Done
//     again), those whose plan failed become Error (retried like any
//     failure), and, for a refresh by age, the others get a new Done (their
//     age starts again);
//  3. repair: the Refreshing objects are applied (Update, or UpdateBatch
//     with a BatchTarget) as a refresh round, and their outcome written:
//     Done, logged and counted as drift repaired with the changes of their
//     plan, or Error.
//
// An object changed by a writer between 1 and 2 is not marked: the
// writer's version is Pending and applied by an incremental round.

// checkRound checks round, Done objects read in txn. With renew, objects
// without drift get a new Done status (a refresh by age).
func (r *reconciler[Obj]) checkRound(ctx context.Context, txn statedb.ReadTxn, round []work[Obj], renew bool) {
	j := r.newPlanJob(ctx, txn, round)
	r.exec.execute(j)
	if ctx.Err() != nil {
		return // shutting down: the outcome may be the cancellation itself
	}
	now := time.Now()
	wtxn := r.db.WriteTxn(r.cfg.Table)
	defer wtxn.Abort()
	var repairs []work[Obj]
	skipped := 0
	for i := range round {
		w := &round[i]
		switch {
		case w.err != nil:
			r.failedAttempt(w, now, true)
			r.writeResult(wtxn, w, now)
		case len(w.plan) == 0:
			skipped++
			if renew {
				r.writeResult(wtxn, w, now)
			}
		default:
			if obj, rev, ok := r.markRefreshing(wtxn, w); ok {
				repairs = append(repairs, work[Obj]{obj: obj, rev: rev, key: w.key, refresh: true,
					plan: w.plan, planned: true, found: w.found})
			}
		}
	}
	if skipped > 0 {
		r.cfg.Metrics.Skipped(r.cfg.Name, r.tableName, OpRefresh, skipped)
	}
	txn = wtxn.Commit()
	r.own = r.cfg.Table.Revision(txn) // its renewals are no changes for the next pass
	if len(repairs) > 0 {
		r.processRound(ctx, txn, repairs, true)
	}
}

// newPlanJob makes the executor's job that plans round: one unit per
// object, or with a BatchPlanner the round split evenly across the
// workers.
func (r *reconciler[Obj]) newPlanJob(ctx context.Context, txn statedb.ReadTxn, round []work[Obj]) *job[Obj] {
	j := &job[Obj]{ctx: ctx, txn: txn, round: round, n: len(round), op: OpRefresh, plan: true}
	if r.batchPlanner == nil {
		return j
	}
	j.order = make([]int, len(round))
	for i := range j.order {
		j.order[i] = i
	}
	j.spans = splitSpans(nil, 0, len(round), r.cfg.Workers, false)
	j.n = len(j.spans)
	return j
}

// markRefreshing writes w's object with a Refreshing status (a new ID) and
// returns it as stored, with its revision. As writeResult, it writes when
// the object is unchanged since the check read it or, with a status ID,
// when only other reconcilers' statuses changed; otherwise the object was
// changed by a writer, and ok is false.
func (r *reconciler[Obj]) markRefreshing(wtxn statedb.WriteTxn, w *work[Obj]) (obj Obj, rev statedb.Revision, ok bool) {
	st := StatusRefreshing()
	q := statedb.QueryByPrimaryKey[Obj](r.cfg.Table, index.Key(r.keyOf(w)))
	if _, _, err := r.cfg.Table.CompareAndSwap(wtxn, w.rev, r.cfg.SetObjectStatus(r.cfg.CloneObject(w.obj), st)); err != nil {
		checked := r.cfg.GetObjectStatus(w.obj)
		if checked.ID == 0 {
			return obj, 0, false
		}
		cur, _, found := r.cfg.Table.Get(wtxn, q)
		if !found {
			return obj, 0, false
		}
		if now := r.cfg.GetObjectStatus(cur); now.ID != checked.ID || now.Kind != StatusKindDone {
			return obj, 0, false
		}
		if _, _, err := r.cfg.Table.Insert(wtxn, r.cfg.SetObjectStatus(r.cfg.CloneObject(cur), st)); err != nil {
			return obj, 0, false
		}
	}
	obj, rev, ok = r.cfg.Table.Get(wtxn, q)
	return obj, rev, ok
}
