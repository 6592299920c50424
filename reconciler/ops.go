package reconciler

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/steadystate/steadystate/statedb"
)

// The target is called only through these functions: each recovers a panic
// into an error for the object (the package doc's "A panic is an error")
// and measures the operation.

func (r *reconciler[Obj]) recovered(op Operation, err *error) {
	if p := recover(); p != nil {
		*err = panicError{value: p}
		r.cfg.Logger.Error("Target operation panicked", "operation", op, "panic", p, "stack", string(debug.Stack()))
	}
}

func (r *reconciler[Obj]) update(ctx context.Context, txn statedb.ReadTxn, obj Obj, op Operation) (err error) {
	if !r.untimed {
		start := time.Now()
		defer func() {
			r.cfg.Metrics.OperationDone(r.cfg.Name, r.tableName, op, time.Since(start), 1, errCount(err))
		}()
	}
	defer r.recovered(op, &err)
	return r.cfg.Target.Update(ctx, txn, obj)
}

func (r *reconciler[Obj]) delete(ctx context.Context, txn statedb.ReadTxn, obj Obj) (err error) {
	if !r.untimed {
		start := time.Now()
		defer func() {
			r.cfg.Metrics.OperationDone(r.cfg.Name, r.tableName, OpDelete, time.Since(start), 1, errCount(err))
		}()
	}
	defer r.recovered(OpDelete, &err)
	return r.cfg.Target.Delete(ctx, txn, obj)
}

func (r *reconciler[Obj]) prune(ctx context.Context, txn statedb.ReadTxn) (err error) {
	start := time.Now()
	defer func() {
		r.cfg.Metrics.PruneDone(r.cfg.Name, r.tableName, time.Since(start), err)
	}()
	defer r.recovered(OpPrune, &err)
	return r.cfg.Target.Prune(ctx, txn, r.cfg.Table.All(txn))
}

// batchOp applies entries with the batch target. A panic fails every entry
// of the batch: the target's operations are idempotent, so they are simply
// retried.
func (r *reconciler[Obj]) batchOp(ctx context.Context, txn statedb.ReadTxn, op Operation, entries []BatchEntry[Obj]) {
	start := time.Now()
	var err error
	func() {
		defer r.recovered(op, &err)
		if op == OpDelete {
			r.batch.DeleteBatch(ctx, txn, entries)
		} else {
			r.batch.UpdateBatch(ctx, txn, entries)
		}
	}()
	failed := 0
	for i := range entries {
		if err != nil {
			entries[i].Result = err
		}
		if entries[i].Result != nil {
			failed++
		}
	}
	r.cfg.Metrics.OperationDone(r.cfg.Name, r.tableName, op, time.Since(start), len(entries), failed)
}

func errCount(err error) int {
	if err != nil {
		return 1
	}
	return 0
}

// runUnit runs one unit of j on a worker goroutine. With a Planner target
// an Update or Delete of one object is planned first (unless it was, see
// check.go) and not made when the plan is empty. Batch units are not
// planned: a batch target compares with the real system itself, and
// planning each object would undo the point of the batch. The units of a
// plan job only plan.
func (r *reconciler[Obj]) runUnit(ctx context.Context, j *job[Obj], in unitIn[Obj]) unitOut[Obj] {
	switch {
	case in.busy != nil:
		return unitOut[Obj]{err: in.busy}
	case j.prune:
		return r.runPrune(ctx, j.txn)
	case j.plan && in.plans != nil:
		r.runBatchPlan(ctx, j.txn, in.plans)
		return unitOut[Obj]{plans: in.plans}
	case j.plan:
		// A check's failure is the object's, as its Update's would be.
		p, err := r.plan(ctx, j.txn, in.op, in.obj)
		return unitOut[Obj]{plan: p, err: err}
	case in.batch != nil:
		r.runBatch(ctx, j.txn, in.op, in.batch)
		return unitOut[Obj]{batch: in.batch}
	}
	op := in.op
	p := in.plan
	if r.planner != nil && !in.planned {
		var err error
		if p, err = r.plan(ctx, j.txn, op, in.obj); err != nil {
			return unitOut[Obj]{err: fmt.Errorf("plan of %s: %w", op, err)}
		}
		if len(p) == 0 {
			r.cfg.Metrics.Skipped(r.cfg.Name, r.tableName, op, 1)
			return unitOut[Obj]{skipped: true}
		}
	}
	var err error
	if in.deleted {
		err = r.delete(ctx, j.txn, in.obj)
	} else {
		err = r.update(ctx, j.txn, in.obj, op)
	}
	return unitOut[Obj]{err: err, plan: p}
}

// runBatch applies a batch unit's entries; entries whose Result is set
// already (their key is busy) are left out of the target's batch.
func (r *reconciler[Obj]) runBatch(ctx context.Context, txn statedb.ReadTxn, op Operation, entries []BatchEntry[Obj]) {
	pass := entries
	var idx []int
	for i := range entries {
		if entries[i].Result != nil {
			idx = make([]int, 0, len(entries))
			break
		}
	}
	if idx != nil {
		pass = make([]BatchEntry[Obj], 0, len(entries))
		for i := range entries {
			if entries[i].Result == nil {
				idx = append(idx, i)
				pass = append(pass, entries[i])
			}
		}
	}
	if len(pass) > 0 {
		r.batchOp(ctx, txn, op, pass)
	}
	for k, i := range idx {
		entries[i].Result = pass[k].Result
	}
}

// runPrune prunes, after planning it with a Planner target: an empty plan
// skips the Prune. Its outcome carries the plan, whose changes are logged
// and counted once the prune succeeded.
func (r *reconciler[Obj]) runPrune(ctx context.Context, txn statedb.ReadTxn) unitOut[Obj] {
	var p Plan
	if r.planner != nil {
		var err error
		start := time.Now()
		func() {
			defer r.recovered(OpPrune, &err)
			p, err = r.planner.PlanPrune(ctx, txn, r.cfg.Table.All(txn))
		}()
		r.cfg.Metrics.PlanDone(r.cfg.Name, r.tableName, OpPrune, time.Since(start), err)
		if err != nil {
			return unitOut[Obj]{err: fmt.Errorf("plan of prune: %w", err)}
		}
		if len(p) == 0 {
			r.cfg.Metrics.Skipped(r.cfg.Name, r.tableName, OpPrune, 1)
			return unitOut[Obj]{skipped: true}
		}
	}
	return unitOut[Obj]{err: r.prune(ctx, txn), plan: p}
}
