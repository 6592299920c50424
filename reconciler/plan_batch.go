package reconciler

import (
	"context"
	"time"

	"github.com/steadystate/steadystate/statedb"
)

// PlanEntry is one object of a batch plan; the target sets Plan and
// Result.
type PlanEntry[Obj any] struct {
	Object   Obj
	Revision statedb.Revision
	// Plan is what an Update of Object would change: PlanUpdate's plan.
	Plan Plan
	// Result is PlanUpdate's error for Object.
	Result error
}

// BatchPlanner is an optional interface of a Planner target that plans the
// Updates of many objects with one read of the real system (one route
// listing per routing table, one iptables-save per table) instead of one
// read per object. The reconciler uses it to check objects for drift (a
// refresh by age, or objects a DriftTarget reported): a round of checks is
// one PlanUpdateBatch per worker (Config.Workers), and then, with a
// BatchTarget, one UpdateBatch of the objects whose plan is not empty.
// Each entry's Plan and Result must be what PlanUpdate would return for
// it; every entry must get them.
type BatchPlanner[Obj any] interface {
	PlanUpdateBatch(ctx context.Context, txn statedb.ReadTxn, batch []PlanEntry[Obj])
}

// batchPlan plans entries with the BatchPlanner. A panic fails every entry
// of the batch.
func (r *reconciler[Obj]) batchPlan(ctx context.Context, txn statedb.ReadTxn, entries []PlanEntry[Obj]) {
	start := time.Now()
	var err error
	func() {
		defer r.recovered(OpRefresh, &err)
		r.batchPlanner.PlanUpdateBatch(ctx, txn, entries)
	}()
	if err != nil {
		for i := range entries {
			entries[i].Plan, entries[i].Result = nil, err
		}
	}
	r.cfg.Metrics.PlanDone(r.cfg.Name, r.tableName, OpRefresh, time.Since(start), err)
}

// runBatchPlan plans a batch unit's entries; entries whose Result is set
// already (their key is busy) are left out of the target's batch.
func (r *reconciler[Obj]) runBatchPlan(ctx context.Context, txn statedb.ReadTxn, entries []PlanEntry[Obj]) {
	pass := make([]PlanEntry[Obj], 0, len(entries))
	idx := make([]int, 0, len(entries))
	for i := range entries {
		if entries[i].Result == nil {
			idx = append(idx, i)
			pass = append(pass, entries[i])
		}
	}
	if len(pass) > 0 {
		r.batchPlan(ctx, txn, pass)
	}
	for k, i := range idx {
		entries[i].Plan, entries[i].Result = pass[k].Plan, pass[k].Result
	}
}
