package reconcilertest

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// Op is one operation the reconciler made on a Target.
type Op[Obj any] struct {
	// Kind is reconciler.OpUpdate, OpDelete or OpPrune. (A target cannot
	// tell a refresh from an update: both are Update calls.)
	Kind reconciler.Operation
	// Key is the object's key; empty for a Prune.
	Key string
	// Object is the object; the zero value for a Prune.
	Object Obj
	// Batch tells that the operation was an entry of an UpdateBatch or
	// DeleteBatch.
	Batch bool
	// Done tells that the operation has returned; Err is its outcome.
	Done bool
	Err  error
}

// String returns "update(key)", "delete(key)" or "prune".
func (op Op[Obj]) String() string {
	if op.Kind == reconciler.OpPrune {
		return string(op.Kind)
	}
	return fmt.Sprintf("%s(%s)", op.Kind, op.Key)
}

// Target is a reconciler.Target that records every operation and stands
// for a real system: a map from key to the last object applied. Update
// stores the object under its key, Delete removes it, Prune removes every
// key that is not desired; a failed operation changes nothing. Inject
// makes it misbehave. Create it with NewTarget.
type Target[Obj any] struct {
	key func(Obj) string

	mu         sync.Mutex
	changed    notifier
	ops        []Op[Obj]
	batches    []Batch
	state      map[string]Obj
	faults     map[string]*fault // installed, by key
	pruneFault *fault
	blocking   []*fault // Block faults not yet cleared, installed or used up
	blocked    int      // operations blocked right now
	plans      int      // planner calls (a batch plan counts once)

	driftOn       bool          // ReportsDrift was called
	watches       []*driftWatch // running WatchDrift calls
	watchErr      error         // FailDriftWatch's error, until healed
	watchFailures int           // WatchDrift calls that failed at once
}

// NewTarget returns an empty target that knows objects by key(obj).
func NewTarget[Obj any](key func(Obj) string) *Target[Obj] {
	return &Target[Obj]{key: key, state: map[string]Obj{}, faults: map[string]*fault{}}
}

var _ reconciler.Target[int] = (*Target[int])(nil)

// Update records the operation and, unless a fault says otherwise, stores
// obj as the real system's object for its key.
func (t *Target[Obj]) Update(ctx context.Context, _ statedb.ReadTxn, obj Obj) error {
	return t.applyObject(ctx, reconciler.OpUpdate, obj, false)
}

// Delete records the operation and, unless a fault says otherwise, removes
// obj's key from the real system.
func (t *Target[Obj]) Delete(ctx context.Context, _ statedb.ReadTxn, obj Obj) error {
	return t.applyObject(ctx, reconciler.OpDelete, obj, false)
}

// applyObject is an Update or a Delete, alone or as a batch entry.
func (t *Target[Obj]) applyObject(ctx context.Context, kind reconciler.Operation, obj Obj, batch bool) error {
	key := t.key(obj)
	return t.apply(ctx, Op[Obj]{Kind: kind, Key: key, Object: obj, Batch: batch}, func() {
		if kind == reconciler.OpDelete {
			delete(t.state, key)
		} else {
			t.state[key] = obj
		}
	})
}

// Prune records the operation and, unless a fault set with InjectPrune
// says otherwise, removes from the real system every key that is not in
// desired.
func (t *Target[Obj]) Prune(ctx context.Context, _ statedb.ReadTxn, desired iter.Seq2[Obj, statedb.Revision]) error {
	keep := map[string]bool{}
	for obj := range desired {
		keep[t.key(obj)] = true
	}
	return t.apply(ctx, Op[Obj]{Kind: reconciler.OpPrune}, func() {
		maps.DeleteFunc(t.state, func(key string, _ Obj) bool { return !keep[key] })
	})
}

// apply records op, lets its fault (if any) act, and if the operation
// succeeds runs change (with t.mu held) to apply it to the real system.
func (t *Target[Obj]) apply(ctx context.Context, op Op[Obj], change func()) (err error) {
	t.mu.Lock()
	i := len(t.ops)
	t.ops = append(t.ops, op)
	var out outcome
	if err = ctx.Err(); err == nil {
		out = t.hitLocked(op)
	} // else: a real system's calls fail once their context is done
	t.changed.wake()
	t.mu.Unlock()

	defer func() {
		// Also when panicking: the operation is over either way.
		t.mu.Lock()
		defer t.mu.Unlock()
		t.ops[i].Done, t.ops[i].Err = true, err
		if err == nil {
			change()
		}
		t.changed.wake()
	}()
	switch {
	case out.block != nil:
		if out.deaf {
			ctx = context.WithoutCancel(ctx)
		}
		err = t.block(ctx, out.block)
	case out.panics:
		err = out.err
		panic(err)
	case out.err != nil:
		err = out.err
	}
	return err
}

// block waits until released closes (nil error) or ctx ends.
func (t *Target[Obj]) block(ctx context.Context, released <-chan struct{}) error {
	t.mu.Lock()
	t.blocked++
	t.changed.wake()
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.blocked--
		t.changed.wake()
		t.mu.Unlock()
	}()
	select {
	case <-released:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Ops returns every operation so far, in the order they were made.
// Operations are recorded when they start; Done says which have returned.
func (t *Target[Obj]) Ops() []Op[Obj] {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.ops)
}

// NumOps returns how many operations were made so far.
func (t *Target[Obj]) NumOps() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.ops)
}

// Count returns how many operations of kind on key were made so far; an
// empty key counts every key.
func (t *Target[Obj]) Count(kind reconciler.Operation, key string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, op := range t.ops {
		if op.Kind == kind && (key == "" || op.Key == key) {
			n++
		}
	}
	return n
}

// Plans returns how many times the reconciler called the planner of a
// target made with Planner: each PlanUpdate, PlanDelete and PlanPrune,
// and each PlanUpdateBatch once, as one read of a real system.
func (t *Target[Obj]) Plans() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.plans
}

// Blocked returns how many operations are blocked by a fault right now.
func (t *Target[Obj]) Blocked() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.blocked
}

// State returns a copy of the real system: the object applied last under
// each key.
func (t *Target[Obj]) State() map[string]Obj {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.state)
}

// SetState changes the real system behind the reconciler's back (drift):
// key now holds obj. It is not recorded as an operation.
func (t *Target[Obj]) SetState(key string, obj Obj) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.state[key] = obj
	t.changed.wake()
}

// RemoveState removes key from the real system behind the reconciler's
// back (drift). It is not recorded as an operation.
func (t *Target[Obj]) RemoveState(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.state, key)
	t.changed.wake()
}

// Changed returns a channel that closes at the target's next change: an
// operation that starts, blocks or returns, a change of the real system,
// a fault injected or cleared. Take it before looking at the target, then
// wait on it, and no change is missed.
func (t *Target[Obj]) Changed() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.changed.watch()
}

// WaitUntil waits until cond returns true, evaluating it again at every
// change of the target; what says in the failure what was awaited. cond
// may call the target's methods.
func (t *Target[Obj]) WaitUntil(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	waitUntil(tb, what, t.describe, t.Changed, cond)
}

// describe summarizes the target, for a failure message.
func (t *Target[Obj]) describe() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return fmt.Sprintf("%d operations %v, %d blocked, real system %v", len(t.ops), t.ops[max(len(t.ops)-10, 0):], t.blocked, slices.Sorted(maps.Keys(t.state)))
}

// WaitForOps waits until at least n operations have been made and returns
// every operation so far.
func (t *Target[Obj]) WaitForOps(tb testing.TB, n int) []Op[Obj] {
	tb.Helper()
	var ops []Op[Obj]
	t.WaitUntil(tb, fmt.Sprintf("%d target operations", n), func() bool {
		ops = t.Ops()
		return len(ops) >= n
	})
	return ops
}

// WaitForBlocked waits until exactly n operations are blocked by faults.
func (t *Target[Obj]) WaitForBlocked(tb testing.TB, n int) {
	tb.Helper()
	t.WaitUntil(tb, fmt.Sprintf("%d blocked target operations", n), func() bool { return t.Blocked() == n })
}

// WaitForState waits until the real system holds exactly the keys of want,
// each with an object that equal reports as the same, and returns it.
func (t *Target[Obj]) WaitForState(tb testing.TB, want map[string]Obj, equal func(a, b Obj) bool) map[string]Obj {
	tb.Helper()
	var got map[string]Obj
	t.WaitUntil(tb, fmt.Sprintf("the real system to hold %d objects %v", len(want), slices.Sorted(maps.Keys(want))), func() bool {
		got = t.State()
		return maps.EqualFunc(got, want, equal)
	})
	return got
}
