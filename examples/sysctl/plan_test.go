package sysctl

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/steadystate/steadystate/examples/netnstest"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// desiredOf is an iter.Seq2 of objs, as Prune and PlanPrune take it.
func desiredOf(objs ...*Sysctl) func(func(*Sysctl, statedb.Revision) bool) {
	return func(yield func(*Sysctl, statedb.Revision) bool) {
		for i, o := range objs {
			if !yield(o, statedb.Revision(i+1)) {
				return
			}
		}
	}
}

// The plan of each operation is exactly what the operation then does: an
// empty plan when it writes nothing, else one change with the value before
// and after. Checked on a fake sysctl tree, counting writes.
func TestPlanAgreesWithOperations(t *testing.T) {
	ctx := context.Background()
	tg, root, writes := fakeRoot(t, map[string]string{"a.x": "0", "a.y": "4096\t87380", "a.z": "7"})
	tests := []struct {
		name string
		plan func() (reconciler.Plan, error)
		do   func() error
		want string // the plan's String(); "" for an empty plan
	}{
		{
			name: "update to the current value (spacing differs)",
			plan: func() (reconciler.Plan, error) {
				return tg.PlanUpdate(ctx, nil, &Sysctl{Name: "a.y", Value: "4096 87380"})
			},
			do: func() error { return tg.Update(ctx, nil, &Sysctl{Name: "a.y", Value: "4096 87380"}) },
		},
		{
			name: "update to a new value",
			plan: func() (reconciler.Plan, error) { return tg.PlanUpdate(ctx, nil, &Sysctl{Name: "a.x", Value: "1"}) },
			do:   func() error { return tg.Update(ctx, nil, &Sysctl{Name: "a.x", Value: "1"}) },
			want: "change sysctl a.x: 0 -> 1\n",
		},
		{
			name: "the same update again",
			plan: func() (reconciler.Plan, error) { return tg.PlanUpdate(ctx, nil, &Sysctl{Name: "a.x", Value: "1"}) },
			do:   func() error { return tg.Update(ctx, nil, &Sysctl{Name: "a.x", Value: "1"}) },
		},
		{
			name: "delete of a key it never changed",
			plan: func() (reconciler.Plan, error) { return tg.PlanDelete(ctx, nil, &Sysctl{Name: "a.y", Value: "1"}) },
			do:   func() error { return tg.Delete(ctx, nil, &Sysctl{Name: "a.y", Value: "1"}) },
		},
		{
			name: "update of a second key",
			plan: func() (reconciler.Plan, error) { return tg.PlanUpdate(ctx, nil, &Sysctl{Name: "a.z", Value: "8"}) },
			do:   func() error { return tg.Update(ctx, nil, &Sysctl{Name: "a.z", Value: "8"}) },
			want: "change sysctl a.z: 7 -> 8\n",
		},
		{
			name: "prune restores what it changed and is not desired, only that",
			plan: func() (reconciler.Plan, error) {
				return tg.PlanPrune(ctx, nil, desiredOf(&Sysctl{Name: "a.z", Value: "8"}))
			},
			do:   func() error { return tg.Prune(ctx, nil, desiredOf(&Sysctl{Name: "a.z", Value: "8"})) },
			want: "change sysctl a.x: 1 -> 0\n",
		},
		{
			name: "delete restores",
			plan: func() (reconciler.Plan, error) { return tg.PlanDelete(ctx, nil, &Sysctl{Name: "a.z", Value: "8"}) },
			do:   func() error { return tg.Delete(ctx, nil, &Sysctl{Name: "a.z", Value: "8"}) },
			want: "change sysctl a.z: 8 -> 7\n",
		},
		{
			name: "nothing left to prune",
			plan: func() (reconciler.Plan, error) { return tg.PlanPrune(ctx, nil, desiredOf()) },
			do:   func() error { return tg.Prune(ctx, nil, desiredOf()) },
		},
	}
	for _, tt := range tests {
		p, err := tt.plan()
		if err != nil {
			t.Fatalf("%s: plan: %v", tt.name, err)
		}
		if p.String() != tt.want {
			t.Fatalf("%s: plan %q, want %q", tt.name, p.String(), tt.want)
		}
		before := *writes
		if err := tt.do(); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if wrote := *writes - before; (wrote == 0) != (len(p) == 0) || wrote > len(p) {
			t.Fatalf("%s: the plan has %d changes, the operation wrote %d times", tt.name, len(p), wrote)
		}
	}
	if x, z := readFake(t, root, "a.x"), readFake(t, root, "a.z"); normalize(x) != "0" || normalize(z) != "7" {
		t.Fatalf("a.x=%q a.z=%q, want the originals", x, z)
	}
}

// A plan fails as its operation would, and never writes.
func TestPlanErrors(t *testing.T) {
	ctx := context.Background()
	tg, root, writes := fakeRoot(t, map[string]string{"net.ipv4.ip_forward": "0", "kernel.x": "1"})
	for _, tt := range []struct {
		obj  *Sysctl
		want error
	}{
		{&Sysctl{Name: "net.ipv4.no_such_key", Value: "1"}, errUnknownKey},
		{&Sysctl{Name: "net/../x", Value: "1"}, ErrInvalid},
	} {
		if _, err := tg.PlanUpdate(ctx, nil, tt.obj); !errors.Is(err, tt.want) || !reconciler.IsTerminal(err) {
			t.Errorf("PlanUpdate(%v) = %v, want a terminal error wrapping %v", tt.obj, err, tt.want)
		}
	}
	tg.networkOnly = true
	if _, err := tg.PlanUpdate(ctx, nil, &Sysctl{Name: "kernel.x", Value: "2"}); !errors.Is(err, ErrNotNetwork) {
		t.Errorf("PlanUpdate of kernel.x with NetworkOnly = %v, want ErrNotNetwork", err)
	}
	// A key that disappeared after the target changed it has nothing to
	// restore.
	if err := tg.Update(ctx, nil, &Sysctl{Name: "net.ipv4.ip_forward", Value: "1"}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(root, "net/ipv4/ip_forward")); err != nil {
		t.Fatal(err)
	}
	if p, err := tg.PlanDelete(ctx, nil, &Sysctl{Name: "net.ipv4.ip_forward"}); err != nil || len(p) != 0 {
		t.Errorf("PlanDelete of a gone key = %v, %v; want nothing", p, err)
	}
	if *writes != 1 {
		t.Errorf("%d writes, want only the Update's", *writes)
	}
}

// Against the kernel, in a namespace: the plan is empty after an apply,
// shows drift made with sysctl -w, which the Update then repairs, and
// PlanPrune lists the target's leftover but never a key set by someone
// else.
func TestPlanInNamespace(t *testing.T) {
	ns := netnstest.New(t)
	ctx := context.Background()
	tg := mustTarget(t, TargetConfig{NetNS: string(ns)})
	fwd := &Sysctl{Name: "net.ipv4.ip_forward", Value: "1"}
	local := &Sysctl{Name: "net.ipv4.conf.lo.accept_local", Value: "1"}
	orig := readNS(t, ns, fwd.Name)
	if orig == "1" {
		t.Fatalf("ip_forward is 1 in a new namespace")
	}

	p, err := tg.PlanUpdate(ctx, nil, fwd)
	if err != nil || p.String() != "change sysctl net.ipv4.ip_forward: 0 -> 1\n" {
		t.Fatalf("plan before the apply: %q, %v", p, err)
	}
	for _, s := range []*Sysctl{fwd, local} {
		if err := tg.Update(ctx, nil, s); err != nil {
			t.Fatal(err)
		}
		if p, err := tg.PlanUpdate(ctx, nil, s); err != nil || len(p) != 0 {
			t.Fatalf("plan of %s after the apply: %q, %v; want nothing", s, p, err)
		}
	}

	// Drift: someone sets it back by hand.
	if out, err := ns.Command("sysctl", "-w", "net.ipv4.ip_forward=0"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if p, err := tg.PlanUpdate(ctx, nil, fwd); err != nil || p.String() != "change sysctl net.ipv4.ip_forward: 0 -> 1\n" {
		t.Fatalf("plan after the drift: %q, %v", p, err)
	}
	if got := readNS(t, ns, fwd.Name); got != "0" {
		t.Fatalf("the plan changed ip_forward to %q", got)
	}
	if err := tg.Update(ctx, nil, fwd); err != nil {
		t.Fatal(err)
	}
	if got := readNS(t, ns, fwd.Name); got != "1" {
		t.Fatalf("ip_forward after the repair = %q", got)
	}

	// A key set by someone else is not the target's: never a leftover.
	if out, err := ns.Command("sysctl", "-w", "net.ipv4.conf.lo.arp_ignore=1"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	p, err = tg.PlanPrune(ctx, nil, desiredOf(local))
	if err != nil || p.String() != "change sysctl net.ipv4.ip_forward: 1 -> "+orig+"\n" {
		t.Fatalf("PlanPrune with only accept_local desired: %q, %v", p, err)
	}
	if err := tg.Prune(ctx, nil, desiredOf(local)); err != nil {
		t.Fatal(err)
	}
	if p, err := tg.PlanPrune(ctx, nil, desiredOf(local)); err != nil || len(p) != 0 {
		t.Fatalf("PlanPrune after the prune: %q, %v", p, err)
	}
	if got := readNS(t, ns, "net.ipv4.conf.lo.arp_ignore"); got != "1" {
		t.Fatalf("someone else's setting was changed: %q", got)
	}
}
