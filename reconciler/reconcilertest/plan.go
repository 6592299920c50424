package reconcilertest

import (
	"context"
	"iter"
	"maps"
	"slices"

	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// PlannerTarget is a Target that also implements reconciler.Planner: it
// plans by comparing the desired object with the real system's (its
// state). Get it with Target.Planner.
type PlannerTarget[Obj any] struct {
	*Target[Obj]
	planner planner[Obj]
}

// BatchPlannerTarget is a BatchTarget that also implements
// reconciler.Planner. Get it with BatchTarget.Planner.
type BatchPlannerTarget[Obj any] struct {
	BatchTarget[Obj]
	planner planner[Obj]
}

var (
	_ reconciler.Planner[int]      = PlannerTarget[int]{}
	_ reconciler.Planner[int]      = BatchPlannerTarget[int]{}
	_ reconciler.BatchTarget[int]  = BatchPlannerTarget[int]{}
	_ reconciler.BatchPlanner[int] = BatchPlannerTarget[int]{}
)

// Planner returns t with reconciler.Planner. equal tells whether the real
// system's object (applied) already matches the desired one: an Update of
// a key whose applied object is equal plans nothing. Plans are not
// recorded as operations and are not hit by faults.
func (t *Target[Obj]) Planner(equal func(applied, desired Obj) bool) PlannerTarget[Obj] {
	return PlannerTarget[Obj]{t, planner[Obj]{t, equal}}
}

// Planner returns b with reconciler.Planner and reconciler.BatchPlanner
// (a batch plan is one call, as one read of a real system); see
// Target.Planner.
func (b BatchTarget[Obj]) Planner(equal func(applied, desired Obj) bool) BatchPlannerTarget[Obj] {
	return BatchPlannerTarget[Obj]{b, planner[Obj]{b.Target, equal}}
}

// PlanUpdate implements reconciler.Planner.
func (p PlannerTarget[Obj]) PlanUpdate(ctx context.Context, txn statedb.ReadTxn, obj Obj) (reconciler.Plan, error) {
	return p.planner.update(obj), nil
}

// PlanDelete implements reconciler.Planner.
func (p PlannerTarget[Obj]) PlanDelete(ctx context.Context, txn statedb.ReadTxn, obj Obj) (reconciler.Plan, error) {
	return p.planner.delete(obj), nil
}

// PlanPrune implements reconciler.Planner.
func (p PlannerTarget[Obj]) PlanPrune(ctx context.Context, txn statedb.ReadTxn, desired iter.Seq2[Obj, statedb.Revision]) (reconciler.Plan, error) {
	return p.planner.prune(desired), nil
}

// PlanUpdate implements reconciler.Planner.
func (p BatchPlannerTarget[Obj]) PlanUpdate(ctx context.Context, txn statedb.ReadTxn, obj Obj) (reconciler.Plan, error) {
	return p.planner.update(obj), nil
}

// PlanDelete implements reconciler.Planner.
func (p BatchPlannerTarget[Obj]) PlanDelete(ctx context.Context, txn statedb.ReadTxn, obj Obj) (reconciler.Plan, error) {
	return p.planner.delete(obj), nil
}

// PlanUpdateBatch implements reconciler.BatchPlanner: each entry gets
// PlanUpdate's plan.
func (p BatchPlannerTarget[Obj]) PlanUpdateBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.PlanEntry[Obj]) {
	p.planner.counted()
	for i := range batch {
		batch[i].Plan, batch[i].Result = p.planner.updateOf(batch[i].Object), nil
	}
}

// PlanPrune implements reconciler.Planner.
func (p BatchPlannerTarget[Obj]) PlanPrune(ctx context.Context, txn statedb.ReadTxn, desired iter.Seq2[Obj, statedb.Revision]) (reconciler.Plan, error) {
	return p.planner.prune(desired), nil
}

// planner compares desired objects with a Target's state.
type planner[Obj any] struct {
	t     *Target[Obj]
	equal func(applied, desired Obj) bool
}

// counted counts one planner call (see Target.Plans).
func (p planner[Obj]) counted() {
	p.t.mu.Lock()
	defer p.t.mu.Unlock()
	p.t.plans++
	p.t.changed.wake()
}

func (p planner[Obj]) update(obj Obj) reconciler.Plan {
	p.counted()
	return p.updateOf(obj)
}

func (p planner[Obj]) updateOf(obj Obj) reconciler.Plan {
	key := p.t.key(obj)
	p.t.mu.Lock()
	defer p.t.mu.Unlock()
	applied, ok := p.t.state[key]
	switch {
	case !ok:
		return reconciler.Plan{{Action: reconciler.ActionAdd, Object: key}}
	case !p.equal(applied, obj):
		return reconciler.Plan{{Action: reconciler.ActionChange, Object: key}}
	}
	return nil
}

func (p planner[Obj]) delete(obj Obj) reconciler.Plan {
	p.counted()
	key := p.t.key(obj)
	p.t.mu.Lock()
	defer p.t.mu.Unlock()
	if _, ok := p.t.state[key]; ok {
		return reconciler.Plan{{Action: reconciler.ActionRemove, Object: key}}
	}
	return nil
}

func (p planner[Obj]) prune(desired iter.Seq2[Obj, statedb.Revision]) reconciler.Plan {
	p.counted()
	keep := map[string]bool{}
	for obj := range desired {
		keep[p.t.key(obj)] = true
	}
	p.t.mu.Lock()
	defer p.t.mu.Unlock()
	var plan reconciler.Plan
	for _, key := range slices.Sorted(maps.Keys(p.t.state)) {
		if !keep[key] {
			plan = append(plan, reconciler.Change{Action: reconciler.ActionRemove, Object: key})
		}
	}
	return plan
}
