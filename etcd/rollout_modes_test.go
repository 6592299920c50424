package etcd_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/steadystate/steadystate/etcd"
)

// A small change is rolled out as a delta over the generation in force: a
// node switches and comes back by reading the change only (its reflector
// lists nothing again), a node's own object still wins over the delta's,
// a removed object goes and comes back; the completion writes the change
// into the generation in force.
func TestRolloutDelta(t *testing.T) {
	cl := startServer(t)
	ctx := ctxT(t)
	c := cl.Client()
	l := etcd.Layout{}
	if _, err := etcd.Apply(ctx, c, l, "objs", etcd.ScopeAll, values("a", "1", "b", "1", "c", "1")); err != nil {
		t.Fatal(err)
	}
	if _, err := etcd.Apply(ctx, c, l, "objs", etcd.NodeScope("n1"), values("b", "own")); err != nil {
		t.Fatal(err)
	}
	f := startSimFleet(t, cl, "n0", "n1")
	old0, old1 := map[string]string{"a": "1", "b": "1", "c": "1"}, map[string]string{"a": "1", "b": "own", "c": "1"}
	f.waitState(old0, "n0")
	f.waitState(old1, "n1")
	f.waitApplied("n0", "n1")
	lists := map[string]int{"n0": f.nodes["n0"].relists(), "n1": f.nodes["n1"].relists()}
	spec := etcd.RolloutSpec{Tables: map[string]map[string][]byte{"objs": values("a", "2", "b", "2")}, Steps: steps(t, "1,100%"),
		Canary: []string{"n1"}, StepTimeout: 30 * time.Second}

	d, err := etcd.StartRollout(ctx, c, l, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	if r := d.Rollout(); len(r.Tables) != 1 || !strings.HasPrefix(r.Tables[0].New, "d") {
		t.Fatalf("a small change not rolled out as a delta: %+v", r.Tables)
	}
	if _, err := d.Step(ctx); err != nil {
		t.Fatal(err)
	}
	f.waitState(map[string]string{"a": "2", "b": "own"}, "n1")
	f.waitState(old0, "n0")
	if _, err := etcd.AbortRollout(ctx, c, l, ""); err != nil {
		t.Fatal(err)
	}
	f.waitState(old1, "n1")
	f.waitApplied("n0", "n1")

	d, err = etcd.StartRollout(ctx, c, l, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	if _, err := d.Run(ctx, nil); err != nil {
		t.Fatal(err)
	}
	f.waitState(map[string]string{"a": "2", "b": "2"}, "n0")
	f.waitState(map[string]string{"a": "2", "b": "own"}, "n1")
	f.waitApplied("n0", "n1")
	for node, n := range lists {
		if got := f.nodes[node].relists(); got != n {
			t.Errorf("node %s listed its source %d times during the rollouts, want none", node, got-n)
		}
	}
	// Its own object gone, n1 reads the fleet-wide one the rollout wrote.
	if _, err := etcd.Apply(ctx, c, l, "objs", etcd.NodeScope("n1"), nil); err != nil {
		t.Fatal(err)
	}
	f.waitState(map[string]string{"a": "2", "b": "2"}, "n1")
}

// A change too large for one transaction is rolled out as new whole
// generations: reached nodes read them whole, the others never see them;
// completed, the new generations are in force and the old ones gone;
// rolled back, the reverse.
func TestRolloutWholeGenerations(t *testing.T) {
	cl := startServer(t)
	ctx := ctxT(t)
	c := cl.Client()
	l := etcd.Layout{}
	state := func(v string, n int) (map[string][]byte, map[string]string) {
		objs, want := map[string][]byte{}, map[string]string{}
		for i := range n {
			objs[fmt.Sprintf("o%03d", i)], want[fmt.Sprintf("o%03d", i)] = []byte(v), v
		}
		return objs, want
	}
	v1, want1 := state("v1", 200)
	if _, err := etcd.Apply(ctx, c, l, "objs", etcd.ScopeAll, v1); err != nil {
		t.Fatal(err)
	}
	names := []string{"n0", "n1", "n2"}
	f := startSimFleet(t, cl, names...)
	f.waitState(want1, names...)
	f.waitApplied(names...)

	v2, want2 := state("v2", 200)
	d, err := etcd.StartRollout(ctx, c, l, etcd.RolloutSpec{Tables: map[string]map[string][]byte{"objs": v2}, Steps: steps(t, "1,100%"), StepTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	r := d.Rollout()
	if !strings.HasPrefix(r.Tables[0].New, "g") {
		t.Fatalf("a change of 200 objects not rolled out as a generation: %+v", r.Tables)
	}
	if _, err := d.Step(ctx); err != nil {
		t.Fatal(err)
	}
	f.waitState(want2, "n0")
	for _, node := range []string{"n1", "n2"} {
		if got, ever := f.state(node, "o000", "v2"); ever || got["o000"] != "v1" {
			t.Fatalf("node %s, not reached: %v (ever v2: %v)", node, got["o000"], ever)
		}
	}
	if r, err = d.Run(ctx, nil); err != nil {
		t.Fatal(err)
	}
	f.waitState(want2, names...)
	f.waitApplied(names...)
	if gens := keys(t, c, l, "/gen/"); len(gens) != 200 || !strings.Contains(gens[0], r.Tables[0].New) {
		t.Fatalf("generations after completion: %d keys, first %v (new %s)", len(gens), gens[:1], r.Tables[0].New)
	}

	v3, _ := state("v3", 200)
	v3["o100"] = []byte("fail-3")
	d, err = etcd.StartRollout(ctx, c, l, etcd.RolloutSpec{Tables: map[string]map[string][]byte{"objs": v3}, Steps: steps(t, "1,100%"), StepTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	if r, err = d.Run(ctx, nil); err == nil || r.Result != etcd.RolloutRolledBack {
		t.Fatalf("a rollout with a value the nodes refuse: %+v, %v", r, err)
	}
	f.waitState(want2, names...)
	f.waitApplied(names...)
	if gens := keys(t, c, l, "/gen/"); len(gens) != 200 || !strings.Contains(gens[0], r.Tables[0].Old) {
		t.Fatalf("generations after the rollback: %d keys, first %v (old %s)", len(gens), gens[:1], r.Tables[0].Old)
	}
}
