package etcd_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/steadystate/steadystate/etcd"
)

// hookedClient is a client of cl whose transactions go through a txnHook
// that loses answers as lose says, calling lost (if set) after each.
func hookedClient(cl interface{ Client() *clientv3.Client }, lose func([]clientv3.Op) (bool, bool), lost func()) *clientv3.Client {
	c := cl.Client()
	c.KV = &txnHook{KV: c.KV, lose: lose, lost: lost}
	return c
}

// A start transaction that committed is a started rollout, whatever
// became of its answer: with the answer lost, StartRollout reads that it
// committed and drives it (its staged delta stays, the nodes get the new
// state); with the answer lost as the caller gives up (ctx cancelled),
// the rollout stays, paused, with its delta, and a resume completes it
// with the new state. A start whose transaction never went is refused
// and leaves nothing staged.
func TestRolloutStartLostAnswer(t *testing.T) {
	cl, ctx, c, l := startWithV1(t)
	names := []string{"n0", "n1"}
	f := startSimFleet(t, cl, names...)
	f.waitApplied(names...)
	spec := func(v string) etcd.RolloutSpec {
		return etcd.RolloutSpec{Tables: map[string]map[string][]byte{"objs": values("a", v)}, Steps: steps(t, "1,100%"), StepTimeout: 30 * time.Second}
	}

	// The answer lost after the commit: the driver drives it.
	hooked := hookedClient(cl, loseOnce(l.RolloutActive(), false, true), nil)
	d, err := etcd.StartRollout(ctx, hooked, l, spec("v2"))
	if err != nil {
		t.Fatalf("a committed start whose answer was lost: %v", err)
	}
	if deltas := keys(t, c, l, "/delta/"); len(deltas) != 1 {
		t.Fatalf("deltas %v; want the rollout's", deltas)
	}
	r, err := d.Run(ctx, nil)
	d.Close(ctx)
	if err != nil || r.Result != etcd.RolloutCompleted {
		t.Fatalf("the rollout: %+v, %v", r, err)
	}
	f.waitState(map[string]string{"a": "v2"}, names...)
	f.waitApplied(names...)

	// The answer lost as the caller gives up: paused, kept, resumable.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hooked = hookedClient(cl, loseOnce(l.RolloutActive(), false, true), cancel)
	if _, err := etcd.StartRollout(sctx, hooked, l, spec("v3")); err == nil || !strings.Contains(err.Error(), "paused") {
		t.Fatalf("a committed start whose caller gave up: %v", err)
	}
	st, err := etcd.RolloutStatus(ctx, c, l)
	if err != nil || st == nil || st.State != etcd.RolloutPaused {
		t.Fatalf("status: %+v, %v", st, err)
	}
	if deltas := keys(t, c, l, "/delta/"); len(deltas) != 1 {
		t.Fatalf("deltas %v; want the paused rollout's", deltas)
	}
	d, err = etcd.ResumeRollout(ctx, c, l, etcd.ResumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err = d.Run(ctx, nil)
	d.Close(ctx)
	if err != nil || r.Result != etcd.RolloutCompleted {
		t.Fatalf("the resumed rollout: %+v, %v", r, err)
	}
	f.waitState(map[string]string{"a": "v3"}, names...)
	f.waitApplied(names...)

	// The transaction never went: refused, nothing left.
	hooked = hookedClient(cl, loseOnce(l.RolloutActive(), false, false), nil)
	if _, err := etcd.StartRollout(ctx, hooked, l, spec("v4")); !errors.Is(err, errLostAnswer) {
		t.Fatalf("a start never sent: %v", err)
	}
	if st, err := etcd.RolloutStatus(ctx, c, l); err != nil || st != nil {
		t.Fatalf("status: %+v, %v", st, err)
	}
	if deltas, gens := keys(t, c, l, "/delta/"), keys(t, c, l, "/gen/"); len(deltas) != 0 || len(gens) != 1 {
		t.Fatalf("deltas %v, generations %v; want the one in force only", deltas, gens)
	}
}

// A rollout's own writes that committed are successes, whatever became
// of their answers: a switch of nodes, the transaction that completes
// it (the driver reports it completed at the revision the history
// holds), and an abort's.
func TestRolloutWritesLostAnswer(t *testing.T) {
	cl, ctx, c, l := startWithV1(t)
	names := []string{"n0", "n1"}
	f := startSimFleet(t, cl, names...)
	f.waitApplied(names...)
	spec := func(v string) etcd.RolloutSpec {
		return etcd.RolloutSpec{Tables: map[string]map[string][]byte{"objs": values("a", v)}, Steps: steps(t, "1,100%"), StepTimeout: 30 * time.Second}
	}

	// The answers of the first switch and of the completion are lost.
	lostSwitch := loseOnce(l.Pin("objs", "n0"), false, true)
	lostFinish := loseOnce(l.RolloutActive(), true, true)
	hooked := hookedClient(cl, func(ops []clientv3.Op) (bool, bool) {
		if lost, commit := lostSwitch(ops); lost {
			return lost, commit
		}
		return lostFinish(ops)
	}, nil)
	d, err := etcd.StartRollout(ctx, hooked, l, spec("v2"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	r, err := d.Run(ctx, nil)
	if err != nil || r.Result != etcd.RolloutCompleted || len(r.Passed) != 2 {
		t.Fatalf("the rollout: %+v, %v", r, err)
	}
	hist, _, err := etcd.RolloutHistory(ctx, c, l)
	if err != nil || len(hist) != 1 || hist[0].ID != r.ID || hist[0].Revision != r.Revision {
		t.Fatalf("history %+v (%v); the driver says %s at revision %d", hist, err, r.ID, r.Revision)
	}
	f.waitState(map[string]string{"a": "v2"}, names...)

	// An abort whose answer is lost.
	d, err = etcd.StartRollout(ctx, c, l, spec("v3"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	if _, err := d.Step(ctx); err != nil {
		t.Fatal(err)
	}
	hooked = hookedClient(cl, loseOnce(l.RolloutActive(), true, true), nil)
	ab, err := etcd.AbortRollout(ctx, hooked, l, "lost")
	if err != nil || ab.Result != etcd.RolloutRolledBack || ab.Revision == 0 {
		t.Fatalf("an abort whose answer was lost: %+v, %v", ab, err)
	}
	hist, _, err = etcd.RolloutHistory(ctx, c, l)
	if err != nil || len(hist) != 2 || hist[1].Revision != ab.Revision {
		t.Fatalf("history %+v (%v); the abort says revision %d", hist, err, ab.Revision)
	}
	f.waitState(map[string]string{"a": "v2"}, names...)
	f.waitApplied(names...)

	// An abort of an unreadable state whose answer is lost.
	d, err = etcd.StartRollout(ctx, c, l, spec("v4"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	if _, err := d.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, l.RolloutActive(), "garbled"); err != nil {
		t.Fatal(err)
	}
	hooked = hookedClient(cl, loseOnce(l.RolloutActive(), true, true), nil)
	ab, err = etcd.AbortRollout(ctx, hooked, l, "")
	if err != nil || ab.Revision == 0 {
		t.Fatalf("an abort of an unreadable state whose answer was lost: %+v, %v", ab, err)
	}
	f.waitState(map[string]string{"a": "v2"}, names...)
}
