package reconcilertest_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
)

// outcome describes an operation's result for the tables below: "ok", the
// error's text, with "terminal " before it for a terminal error, or
// "panic: " and the panic value.
func outcome(f func() error) (s string) {
	defer func() {
		if p := recover(); p != nil {
			s = fmt.Sprintf("panic: %v", p)
		}
	}()
	switch err := f(); {
	case err == nil:
		return "ok"
	case reconciler.IsTerminal(err):
		return "terminal " + err.Error()
	default:
		return err.Error()
	}
}

// Each fault makes the operations on its key fail as it says, for as many
// times as it says; other keys are not affected.
func TestTargetFaults(t *testing.T) {
	errOwn := errors.New("no route to host")
	tests := []struct {
		name  string
		fault reconcilertest.Fault
		want  []string // outcomes of four Updates of a
	}{
		{"times", reconcilertest.Fault{Times: 2},
			[]string{"injected failure of a", "injected failure of a", "ok", "ok"}},
		{"always", reconcilertest.Fault{},
			slices.Repeat([]string{"injected failure of a"}, 4)},
		{"terminal", reconcilertest.Fault{Terminal: true, Times: 1},
			[]string{"terminal injected failure of a (terminal)", "ok", "ok", "ok"}},
		{"own error", reconcilertest.Fault{Err: errOwn, Times: 3},
			[]string{"no route to host", "no route to host", "no route to host", "ok"}},
		{"own terminal error", reconcilertest.Fault{Err: errOwn, Terminal: true},
			slices.Repeat([]string{"terminal no route to host"}, 4)},
		{"panic", reconcilertest.Fault{Panic: true, Times: 2},
			[]string{"panic: injected failure of a (panic)", "panic: injected failure of a (panic)", "ok", "ok"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := reconcilertest.NewTarget(routeKey)
			target.Inject("a", tt.fault)
			var got []string
			for i := range 4 {
				got = append(got, outcome(func() error {
					return target.Update(t.Context(), nil, &Route{Prefix: "a", Via: fmt.Sprint(i)})
				}))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("outcomes %q, want %q", got, tt.want)
			}
			if err := target.Update(t.Context(), nil, &Route{Prefix: "b"}); err != nil {
				t.Errorf("b, without a fault: %v", err)
			}
			// Every operation is recorded, done, with its outcome.
			ops := target.Ops()
			if len(ops) != 5 {
				t.Fatalf("%d operations recorded, want 5: %v", len(ops), ops)
			}
			for i, op := range ops[:4] {
				if !op.Done || op.Kind != reconciler.OpUpdate || op.Key != "a" || op.Object.Via != fmt.Sprint(i) || (op.Err == nil) != (tt.want[i] == "ok") {
					t.Errorf("operation %d recorded as %+v, want a done update of a=%d with outcome %s", i, op, i, tt.want[i])
				}
				if op.Err != nil && tt.fault.Err == nil && !errors.Is(op.Err, reconcilertest.ErrInjected) {
					t.Errorf("operation %d: %v does not wrap ErrInjected", i, op.Err)
				}
			}
			// The real system holds what succeeded last.
			want := map[string]string{"b": ""}
			if slices.Contains(tt.want, "ok") {
				want["a"] = "3"
			}
			if got := vias(target.State()); !maps.Equal(got, want) {
				t.Errorf("real system %v, want %v", got, want)
			}
		})
	}
}

// vias maps each key of the real system to its route's gateway.
func vias(state map[string]*Route) map[string]string {
	out := map[string]string{}
	for k, r := range state {
		out[k] = r.Via
	}
	return out
}

// Clearing a fault, or the function Inject returned, ends it; a later
// Inject replaces an earlier one.
func TestTargetClear(t *testing.T) {
	target := reconcilertest.NewTarget(routeKey)
	update := func() string {
		return outcome(func() error { return target.Update(t.Context(), nil, &Route{Prefix: "a"}) })
	}
	clear := target.Inject("a", reconcilertest.Fault{})
	target.Clear("a")
	if got := update(); got != "ok" {
		t.Errorf("after Clear: %s", got)
	}
	clear() // no longer installed: nothing to do
	clear = target.Inject("a", reconcilertest.Fault{})
	clear()
	if got := update(); got != "ok" {
		t.Errorf("after clear(): %s", got)
	}
	target.Inject("a", reconcilertest.Fault{})
	target.Inject("a", reconcilertest.Fault{Terminal: true})
	if got := update(); !strings.HasPrefix(got, "terminal") {
		t.Errorf("the later fault did not replace the earlier: %s", got)
	}
}

// Delete removes a key, Prune every key that is not desired, and a Prune
// fault works like the others.
func TestTargetDeleteAndPrune(t *testing.T) {
	db, table := newRoutes(t)
	insert(db, table, &Route{Prefix: "a"}, &Route{Prefix: "b"})
	target := reconcilertest.NewTarget(routeKey)
	ctx := t.Context()
	for _, k := range []string{"a", "b", "c"} {
		target.Update(ctx, nil, &Route{Prefix: k})
	}
	target.SetState("stray", &Route{Prefix: "stray"})
	if err := target.Delete(ctx, nil, &Route{Prefix: "b"}); err != nil {
		t.Fatal(err)
	}
	target.InjectPrune(reconcilertest.Fault{Times: 1})
	txn := db.ReadTxn()
	if err := target.Prune(ctx, txn, table.All(txn)); !errors.Is(err, reconcilertest.ErrInjected) || err.Error() != "injected failure of prune" {
		t.Fatalf("first Prune: %v, want the injected failure", err)
	}
	if got := slices.Sorted(maps.Keys(target.State())); !slices.Equal(got, []string{"a", "c", "stray"}) {
		t.Fatalf("after a failed Prune the real system holds %v", got)
	}
	if err := target.Prune(ctx, txn, table.All(txn)); err != nil {
		t.Fatalf("second Prune: %v", err)
	}
	// b is desired but was deleted from the real system: Prune does not
	// bring it back; c and stray are not desired.
	if got := slices.Sorted(maps.Keys(target.State())); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("after Prune the real system holds %v, want [a]", got)
	}
	target.RemoveState("a")
	if n := len(target.State()); n != 0 {
		t.Fatalf("RemoveState left %d objects", n)
	}
	want := "[update(a) update(b) update(c) delete(b) prune prune]"
	if got := fmt.Sprint(target.Ops()); got != want {
		t.Fatalf("operations %s, want %s", got, want)
	}
	if n := target.Count(reconciler.OpUpdate, ""); n != 3 {
		t.Errorf("Count(update) = %d, want 3", n)
	}
	if n := target.Count(reconciler.OpUpdate, "b"); n != 1 {
		t.Errorf("Count(update, b) = %d, want 1", n)
	}
	if n := target.Count(reconciler.OpPrune, ""); n != 2 {
		t.Errorf("Count(prune) = %d, want 2", n)
	}
}

// A blocked operation waits until its fault is cleared, then succeeds; or
// until its context ends, then fails with the context's error. Blocked
// counts it meanwhile.
func TestTargetBlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		target := reconcilertest.NewTarget(routeKey)
		result := make(chan error, 1)
		update := func(ctx context.Context, via string) {
			go func() { result <- target.Update(ctx, nil, &Route{Prefix: "a", Via: via}) }()
		}

		first := target.Inject("a", reconcilertest.Fault{Block: true, Times: 1})
		update(t.Context(), "1")
		target.WaitForBlocked(t, 1)
		if op := target.Ops()[0]; op.Done {
			t.Fatalf("a blocked operation is recorded as done: %+v", op)
		}
		// The fault was used up: the next update goes through, the first
		// stays blocked.
		if err := target.Update(t.Context(), nil, &Route{Prefix: "a", Via: "2"}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := target.Blocked(); n != 1 {
			t.Fatalf("%d blocked, want 1", n)
		}
		first()
		if err := <-result; err != nil {
			t.Fatalf("released operation: %v", err)
		}
		target.WaitForBlocked(t, 0)
		// Released last, so applied last: the real system holds it.
		if got := target.State()["a"].Via; got != "1" {
			t.Fatalf("real system holds a via %s, want 1", got)
		}

		// Clear(key) releases every blocked operation of the key.
		target.Inject("a", reconcilertest.Fault{Block: true})
		update(t.Context(), "3")
		target.WaitForBlocked(t, 1)
		target.Inject("a", reconcilertest.Fault{Block: true}) // replaces, does not release
		synctest.Wait()
		if n := target.Blocked(); n != 1 {
			t.Fatalf("replacing the fault released its operation")
		}
		target.Clear("a")
		if err := <-result; err != nil {
			t.Fatalf("operation released by Clear: %v", err)
		}

		// A cancelled context ends the block with its error.
		target.Inject("a", reconcilertest.Fault{Block: true})
		ctx, cancel := context.WithCancel(t.Context())
		update(ctx, "4")
		target.WaitForBlocked(t, 1)
		cancel()
		if err := <-result; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled blocked operation: %v", err)
		}
		// With its context done an operation fails at once, fault or not,
		// and the fault is not used.
		if err := target.Update(ctx, nil, &Route{Prefix: "b"}); !errors.Is(err, context.Canceled) {
			t.Fatalf("operation with a done context: %v", err)
		}
		target.Clear("a")
	})
}

// Contradictory faults are a bug in the test: Inject panics and says why.
func TestTargetContradictoryFault(t *testing.T) {
	for _, f := range []reconcilertest.Fault{
		{Block: true, Panic: true},
		{Block: true, Terminal: true},
		{Block: true, Err: errors.New("x")},
		{Times: -1},
	} {
		func() {
			defer func() {
				if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), "contradictory") {
					t.Errorf("Inject(%+v): panic %v, want one about a contradictory fault", f, p)
				}
			}()
			reconcilertest.NewTarget(routeKey).Inject("a", f)
		}()
	}
}

// The batch target records each batch and applies its entries like single
// operations; a panic ends the whole batch.
func TestBatchTarget(t *testing.T) {
	target := reconcilertest.NewTarget(routeKey)
	bt := target.Batch()
	target.Inject("b", reconcilertest.Fault{Times: 1})
	entries := func(keys ...string) []reconciler.BatchEntry[*Route] {
		var out []reconciler.BatchEntry[*Route]
		for _, k := range keys {
			out = append(out, reconciler.BatchEntry[*Route]{Object: &Route{Prefix: k}})
		}
		return out
	}
	updates := entries("a", "b", "c")
	bt.UpdateBatch(t.Context(), nil, updates)
	if updates[0].Result != nil || !errors.Is(updates[1].Result, reconcilertest.ErrInjected) || updates[2].Result != nil {
		t.Fatalf("results %v, %v, %v; want only b to fail", updates[0].Result, updates[1].Result, updates[2].Result)
	}
	bt.DeleteBatch(t.Context(), nil, entries("a"))
	target.Inject("c", reconcilertest.Fault{Panic: true})
	if got := outcome(func() error { bt.UpdateBatch(t.Context(), nil, entries("c", "d")); return nil }); !strings.HasPrefix(got, "panic") {
		t.Fatalf("a panicking entry: %s, want the batch to panic", got)
	}
	if got, want := fmt.Sprint(target.Batches()), "[update[3] delete[1] update[2]]"; got != want {
		t.Fatalf("batches %s, want %s", got, want)
	}
	ops := target.Ops()
	if got, want := fmt.Sprint(ops), "[update(a) update(b) update(c) delete(a) update(c)]"; got != want {
		t.Fatalf("operations %s, want %s", got, want)
	}
	for _, op := range ops {
		if !op.Batch || !op.Done {
			t.Errorf("%v is not recorded as a done batch entry", op)
		}
	}
	if got := slices.Sorted(maps.Keys(target.State())); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("real system %v, want [c]", got)
	}
	var _ reconciler.BatchTarget[*Route] = bt
	var _ reconciler.Target[*Route] = bt
}
