package reconciler

import (
	"context"
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
	start := time.Now()
	defer func() {
		r.cfg.Metrics.OperationDone(r.cfg.Name, r.tableName, op, time.Since(start), 1, errCount(err))
	}()
	defer r.recovered(op, &err)
	return r.cfg.Target.Update(ctx, txn, obj)
}

func (r *reconciler[Obj]) delete(ctx context.Context, txn statedb.ReadTxn, obj Obj) (err error) {
	start := time.Now()
	defer func() {
		r.cfg.Metrics.OperationDone(r.cfg.Name, r.tableName, OpDelete, time.Since(start), 1, errCount(err))
	}()
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
