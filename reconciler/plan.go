package reconciler

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/steadystate/steadystate/statedb"
)

// Action is the kind of a planned change to the real system.
type Action string

// The actions of a Change.
const (
	ActionAdd    Action = "add"    // something desired is missing
	ActionChange Action = "change" // something exists but differs
	ActionRemove Action = "remove" // something exists that must go
)

// Change is one change that a target operation would make to the real
// system, in the target's words: what (Object) and, for ActionChange, how
// it differs (Detail, e.g. "1 -> 0" or "mtu 1400 -> 1500").
//
// Repair marks a change of a prune's plan that puts a desired object back
// as it is desired (a rule deleted by hand that the prune restores), as
// opposed to one that removes or undoes what is not desired (a leftover):
// the reconciler counts the first as drift repaired, the others as
// pruned. The changes of update plans need not set it.
type Change struct {
	Action Action `json:"action" yaml:"action"`
	Object string `json:"object" yaml:"object"`
	Detail string `json:"detail,omitempty" yaml:"detail,omitempty"`
	Repair bool   `json:"repair,omitempty" yaml:"repair,omitempty"`
}

// String returns "add route 10.0.0.0/8", "change sysctl net.ipv4.ip_forward: 0 -> 1".
func (c Change) String() string {
	if c.Detail == "" {
		return string(c.Action) + " " + c.Object
	}
	return string(c.Action) + " " + c.Object + ": " + c.Detail
}

// Plan is what an operation, or a whole run, would change. An empty plan
// means the real system already matches.
type Plan []Change

// String lists the changes one per line.
func (p Plan) String() string {
	var b strings.Builder
	for _, c := range p {
		b.WriteString(c.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// Planner is an optional interface of a Target: it says, without changing
// anything, what an Update, Delete or Prune would change. A plan is the
// read half of the target's read-before-write made first-class; it must
// agree with what the operation then does.
//
// With a Planner target the reconciler
//   - skips an Update or Delete whose plan is empty (nothing to write), so a
//     restarted agent adopts what is already applied without touching it;
//   - checks Done objects for drift (a refresh by age, or objects a
//     DriftTarget reported) by planning them, and repairs only those whose
//     plan is not empty, Refreshing until Done again (check.go);
//   - logs and counts every repair of drift (Metrics.DriftRepaired,
//     Config.OnRepair) and every leftover that a prune removes
//     (Metrics.Pruned); a change of a prune's plan marked Repair is a
//     repair, not a leftover;
//   - and DryRun computes the plan of a whole table.
//
// A target that can only recognise its own leftovers (by owner marks, or a
// record of what it applied) can only plan their removal: a plan never sees
// more than its target can.
type Planner[Obj any] interface {
	PlanUpdate(ctx context.Context, txn statedb.ReadTxn, obj Obj) (Plan, error)
	PlanDelete(ctx context.Context, txn statedb.ReadTxn, obj Obj) (Plan, error)
	PlanPrune(ctx context.Context, txn statedb.ReadTxn, desired iter.Seq2[Obj, statedb.Revision]) (Plan, error)
}

// DryRun returns what a full reconciliation of table with target would
// change now, without changing anything: the plan of Prune with every
// desired object, then the plan of an Update of each object, in primary key
// order, whatever its status. The target must implement Planner (else the
// error wraps ErrNoPlanner). An object whose plan fails (or panics) is
// reported in the error, which joins every failure, and the plan holds what
// could be planned. A change that both the prune's plan and an object's
// plan list (a target may list what Prune would restore) appears once.
func DryRun[Obj any](ctx context.Context, db *statedb.DB, table statedb.Table[Obj], target Target[Obj]) (Plan, error) {
	planner, ok := target.(Planner[Obj])
	if !ok {
		return nil, fmt.Errorf("dry run of table %q: %w (%T)", table.Name(), ErrNoPlanner, target)
	}
	txn := db.ReadTxn()
	var plan Plan
	var errs []string
	p, err := safePlan(func() (Plan, error) { return planner.PlanPrune(ctx, txn, table.All(txn)) })
	if err != nil {
		errs = append(errs, "prune: "+err.Error())
	}
	plan = append(plan, p...)
	// Repair does not make a change another: a prune's plan may list what
	// an object's plan lists too.
	seen := make(map[Change]bool, len(p))
	for _, c := range p {
		c.Repair = false
		seen[c] = true
	}
	for obj := range table.All(txn) {
		if ctx.Err() != nil {
			return plan, ctx.Err()
		}
		p, err := safePlan(func() (Plan, error) { return planner.PlanUpdate(ctx, txn, obj) })
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", describe(table, obj), err))
			continue
		}
		for _, c := range p {
			k := c
			k.Repair = false
			if !seen[k] {
				seen[k] = true
				plan = append(plan, c)
			}
		}
	}
	if len(errs) > 0 {
		return plan, fmt.Errorf("dry run of table %q: %d failed: %s", table.Name(), len(errs), strings.Join(errs, "; "))
	}
	return plan, nil
}

// safePlan calls plan, turning a panic into an error.
func safePlan(plan func() (Plan, error)) (p Plan, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicError{value: v}
		}
	}()
	return plan()
}

// describe names obj in messages: its String() if it has one, else its
// primary key.
func describe[Obj any](table statedb.Table[Obj], obj Obj) string {
	if s, ok := any(obj).(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%q", table.PrimaryKey(obj))
}

// plan returns the plan of op on obj, timing it for the metrics.
func (r *reconciler[Obj]) plan(ctx context.Context, txn statedb.ReadTxn, op Operation, obj Obj) (p Plan, err error) {
	start := time.Now()
	defer func() { r.cfg.Metrics.PlanDone(r.cfg.Name, r.tableName, op, time.Since(start), err) }()
	defer r.recovered(op, &err)
	if op == OpDelete {
		return r.planner.PlanDelete(ctx, txn, obj)
	}
	return r.planner.PlanUpdate(ctx, txn, obj)
}
