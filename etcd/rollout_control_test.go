package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/steadystate/steadystate/etcd"
)

// A driver that stops leaves the rollout paused; a resume (while it is
// driven: refused) continues from the step reached and completes; the old
// driver writes nothing more. An abort, while a driver runs, rolls back:
// the reached node returns to the previous state, the driver fails with
// ErrRolloutLost, the history says "aborted".
func TestRolloutPauseResumeAbort(t *testing.T) {
	cl, ctx, c, l := startWithV1(t)
	names := []string{"n0", "n1", "n2"}
	f := startSimFleet(t, cl, names...)
	v1, v2, v3 := map[string]string{"a": "v1"}, map[string]string{"a": "v2"}, map[string]string{"a": "v3"}
	f.waitState(v1, names...)
	f.waitApplied(names...)

	d, err := etcd.StartRollout(ctx, c, l, etcd.RolloutSpec{Tables: map[string]map[string][]byte{"objs": values("a", "v2")},
		Steps: steps(t, "1,50%,100%"), StepTimeout: 30 * time.Second, Driver: "first"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := etcd.RolloutStatus(ctx, c, l)
	if err != nil || st == nil || st.State != etcd.RolloutPaused || st.Driver != nil || st.Rollout.Step != 1 || st.Rollout.Switched != 1 {
		t.Fatalf("status after the driver stopped: %+v, %v", st, err)
	}
	pause := time.Duration(0)
	d2, err := etcd.ResumeRollout(ctx, c, l, etcd.ResumeOptions{Driver: "second", StepPause: &pause})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close(context.Background())
	if _, err := etcd.ResumeRollout(ctx, c, l, etcd.ResumeOptions{}); !errors.Is(err, etcd.ErrRolloutDriven) || !strings.Contains(err.Error(), "second") {
		t.Fatalf("a second resume: %v", err)
	}
	if _, err := d.Step(ctx); !errors.Is(err, etcd.ErrRolloutLost) {
		t.Fatalf("the stopped driver's step: %v", err)
	}
	r, err := d2.Run(ctx, nil)
	if err != nil || r.Result != etcd.RolloutCompleted || len(r.Passed) != 3 || r.Driver != "second" {
		t.Fatalf("resumed: %+v, %v", r, err)
	}
	f.waitState(v2, names...)

	// Abort under a live driver.
	d3, err := etcd.StartRollout(ctx, c, l, etcd.RolloutSpec{Tables: map[string]map[string][]byte{"objs": values("a", "v3")},
		Steps: steps(t, "1,100%"), StepTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d3.Close(context.Background())
	if _, err := d3.Step(ctx); err != nil {
		t.Fatal(err)
	}
	f.waitState(v3, "n0")
	ab, err := etcd.AbortRollout(ctx, c, l, "by the test")
	if err != nil || ab.Result != etcd.RolloutRolledBack || ab.Reason != "aborted: by the test" || ab.Revision == 0 {
		t.Fatalf("abort: %+v, %v", ab, err)
	}
	if _, err := d3.Step(ctx); !errors.Is(err, etcd.ErrRolloutLost) || !strings.Contains(err.Error(), "finished meanwhile") {
		t.Fatalf("the aborted driver's step: %v", err)
	}
	f.waitState(v2, names...)
	f.waitApplied(names...)
	if _, err := etcd.AbortRollout(ctx, c, l, ""); !errors.Is(err, etcd.ErrNoRollout) {
		t.Fatalf("abort with none: %v", err)
	}
	if _, err := etcd.ResumeRollout(ctx, c, l, etcd.ResumeOptions{}); !errors.Is(err, etcd.ErrNoRollout) {
		t.Fatalf("resume with none: %v", err)
	}
	hist, _, err := etcd.RolloutHistory(ctx, c, l)
	if err != nil || len(hist) != 2 || hist[1].Reason != "aborted: by the test" || hist[1].Revision != ab.Revision {
		t.Fatalf("history: %+v, %v", hist, err)
	}
}

// txnHook runs between once, after the client's n-th transaction. With
// lose, it asks of each transaction's operations whether to lose its
// answer: the caller gets errLostAnswer instead, after the transaction
// committed (commit) or without sending it, and calls lost, if set.
type txnHook struct {
	clientv3.KV
	mu      sync.Mutex
	n       int
	between func()
	lose    func(ops []clientv3.Op) (lost, commit bool)
	lost    func()
}

var errLostAnswer = errors.New("test: the answer was lost")

func (k *txnHook) Txn(ctx context.Context) clientv3.Txn {
	return &hookTxn{Txn: k.KV.Txn(ctx), k: k}
}

type hookTxn struct {
	clientv3.Txn
	k   *txnHook
	ops []clientv3.Op
}

func (t *hookTxn) If(cs ...clientv3.Cmp) clientv3.Txn { t.Txn = t.Txn.If(cs...); return t }
func (t *hookTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.Txn, t.ops = t.Txn.Then(ops...), append(t.ops, ops...)
	return t
}
func (t *hookTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }
func (t *hookTxn) Commit() (*clientv3.TxnResponse, error) {
	if t.k.lose != nil {
		t.k.mu.Lock()
		lost, commit := t.k.lose(t.ops)
		t.k.mu.Unlock()
		if lost {
			if commit {
				t.Txn.Commit()
			}
			if t.k.lost != nil {
				t.k.lost()
			}
			return nil, errLostAnswer
		}
	}
	resp, err := t.Txn.Commit()
	t.k.mu.Lock()
	t.k.n--
	run := t.k.n == 0
	t.k.mu.Unlock()
	if run {
		t.k.between()
	}
	return resp, err
}

// Of two rollouts started at once exactly one starts: the second runs
// whole between the first's read of the state in force and its start
// transaction, which then fails; the first is refused naming the
// winner, and leaves no generation behind. Concurrent starts, many
// times: one wins each time.
func TestRolloutOneAtATime(t *testing.T) {
	cl, ctx, c, l := startWithV1(t)
	f := startSimFleet(t, cl, "n0", "n1")
	f.waitApplied("n0", "n1")
	spec := func(v string) etcd.RolloutSpec {
		return etcd.RolloutSpec{Tables: map[string]map[string][]byte{"objs": values("a", v)}, Steps: steps(t, "100%"), StepTimeout: 30 * time.Second}
	}
	var second *etcd.RolloutDriver
	hooked := cl.Client()
	// StartRollout's transactions: the fleet view, then the state in force.
	hooked.KV = &txnHook{KV: hooked.KV, n: 2, between: func() {
		var err error
		if second, err = etcd.StartRollout(ctx, c, l, spec("second")); err != nil {
			t.Errorf("the second start: %v", err)
		}
	}}
	if _, err := etcd.StartRollout(ctx, hooked, l, spec("first")); !errors.Is(err, etcd.ErrRolloutActive) || !strings.Contains(err.Error(), "r000000000001") {
		t.Fatalf("the first start: %v", err)
	}
	if second == nil {
		t.FailNow()
	}
	defer second.Close(context.Background())
	if gens, deltas := keys(t, c, l, "/gen/"), keys(t, c, l, "/delta/"); len(gens) != 1 || len(deltas) != 1 {
		t.Fatalf("generations %v, deltas %v; want the one in force and the winner's delta", gens, deltas)
	}
	if r, err := second.Run(ctx, nil); err != nil {
		t.Fatalf("the winner: %+v, %v", r, err)
	}
	f.waitState(map[string]string{"a": "second"}, "n0", "n1")

	for i := range 5 {
		var wg sync.WaitGroup
		drivers := make([]*etcd.RolloutDriver, 3)
		errs := make([]error, 3)
		for j := range 3 {
			wg.Go(func() {
				drivers[j], errs[j] = etcd.StartRollout(ctx, cl.Client(), l, spec(strings.Repeat("x", i*3+j+1)))
			})
		}
		wg.Wait()
		won := 0
		for j := range 3 {
			if errs[j] == nil {
				won++
				if _, err := drivers[j].Run(ctx, nil); err != nil {
					t.Fatal(err)
				}
				drivers[j].Close(ctx)
			} else if !errors.Is(errs[j], etcd.ErrRolloutActive) && !errors.Is(errs[j], etcd.ErrConflict) {
				t.Fatalf("round %d: %v", i, errs[j])
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d rollouts started: %v", i, won, errs)
		}
	}
}

// Bad input is refused before anything is written, with the reason: a
// step larger than the fleet, an unknown canary, bad steps; a state equal
// to the one in force. A rollout state that does not parse is named by
// status and resume, blocks applies and starts, and an abort rolls back
// the pins it finds (the node returns to the state in force).
func TestRolloutBadInput(t *testing.T) {
	cl, ctx, c, l := startWithV1(t)
	f := startSimFleet(t, cl, "n0", "n1")
	f.waitApplied("n0", "n1")
	good := map[string]map[string][]byte{"objs": values("a", "v2")}
	for _, tc := range []struct {
		name string
		spec etcd.RolloutSpec
		want string
	}{
		{"step larger than the fleet", etcd.RolloutSpec{Tables: good, Steps: []etcd.StepSize{{Count: 3}, {Percent: 100}}}, "step 1 (3) reaches 3 nodes: more than the 2 live nodes"},
		{"unknown canary", etcd.RolloutSpec{Tables: good, Steps: steps(t, "1,100%"), Canary: []string{"n7"}}, `canary node "n7" is not a live node of the fleet (live: n0, n1)`},
		{"no 100%", etcd.RolloutSpec{Tables: good, Steps: []etcd.StepSize{{Count: 1}}}, "must end in 100%"},
		{"no steps", etcd.RolloutSpec{Tables: good}, "no steps"},
		{"bad object name", etcd.RolloutSpec{Tables: map[string]map[string][]byte{"objs": values("a/b", "1")}, Steps: steps(t, "100%")}, `object name "a/b"`},
		{"unchanged", etcd.RolloutSpec{Tables: map[string]map[string][]byte{"objs": values("a", "v1")}, Steps: steps(t, "100%")}, "nothing to roll out"},
	} {
		before, err := c.Get(ctx, "/")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := etcd.StartRollout(ctx, c, l, tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		after, err := c.Get(ctx, "/")
		if err != nil {
			t.Fatal(err)
		}
		if after.Header.Revision != before.Header.Revision {
			t.Errorf("%s: refused, yet etcd moved from revision %d to %d", tc.name, before.Header.Revision, after.Header.Revision)
		}
	}

	// A rollout whose state is then garbled.
	d, err := etcd.StartRollout(ctx, c, l, etcd.RolloutSpec{Tables: good, Steps: steps(t, "1,100%"), StepTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	if _, err := d.Step(ctx); err != nil {
		t.Fatal(err)
	}
	f.waitState(map[string]string{"a": "v2"}, "n0")
	if _, err := c.Put(ctx, l.RolloutActive(), `{"id":"r1","steps":`); err != nil {
		t.Fatal(err)
	}
	unreadable := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, etcd.ErrRolloutUnreadable) || !strings.Contains(err.Error(), l.RolloutActive()) {
			t.Errorf("%s: %v", what, err)
		}
	}
	_, err = etcd.RolloutStatus(ctx, c, l)
	unreadable("status", err)
	d.Close(ctx)
	_, err = etcd.ResumeRollout(ctx, c, l, etcd.ResumeOptions{})
	unreadable("resume", err)
	if _, err := etcd.Apply(ctx, c, l, "objs", etcd.ScopeAll, values("a", "v3")); !errors.Is(err, etcd.ErrRolloutActive) || !strings.Contains(err.Error(), "does not parse") {
		t.Errorf("apply: %v", err)
	}
	if _, err := etcd.StartRollout(ctx, c, l, etcd.RolloutSpec{Tables: good, Steps: steps(t, "100%")}); !errors.Is(err, etcd.ErrRolloutActive) {
		t.Errorf("start: %v", err)
	}
	ab, err := etcd.AbortRollout(ctx, c, l, "")
	if err != nil || !strings.Contains(ab.Reason, "did not parse") || !strings.Contains(ab.Reason, "the pins of objs removed") {
		t.Fatalf("abort of an unreadable rollout: %+v, %v", ab, err)
	}
	f.waitState(map[string]string{"a": "v1"}, "n0", "n1")
	f.waitApplied("n0", "n1")
	if pins := keys(t, c, l, "/pin/"); len(pins) != 0 {
		t.Fatalf("pins left: %v", pins)
	}
	if _, err := etcd.Apply(ctx, c, l, "objs", etcd.ScopeAll, values("a", "v4")); err != nil {
		t.Fatal(err)
	}
	f.waitState(map[string]string{"a": "v4"}, "n0", "n1")

	// History keys that are not rollouts are named.
	if _, err := c.Put(ctx, l.RolloutHistory()+"junk", "{"); err != nil {
		t.Fatal(err)
	}
	hist, warnings, err := etcd.RolloutHistory(ctx, c, l)
	if err != nil || len(warnings) != 1 || warnings[0].Key != l.RolloutHistory()+"junk" || len(hist) != 1 {
		t.Fatalf("history: %+v, %+v, %v", hist, warnings, err)
	}
}

// The history keeps the last RolloutHistoryKept rollouts, oldest first.
func TestRolloutHistoryKept(t *testing.T) {
	cl := startServer(t)
	ctx := ctxT(t)
	c := cl.Client()
	l := etcd.Layout{}
	p, err := etcd.StartPublisher(ctx, etcd.PublisherConfig{Client: c, Layout: l, Node: "n0"}, etcd.NodeStatus{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(context.Background())
	n := etcd.RolloutHistoryKept + 3
	for i := range n {
		d, err := etcd.StartRollout(ctx, c, l, etcd.RolloutSpec{Tables: map[string]map[string][]byte{"objs": values("a", strconv.Itoa(i))},
			Steps: steps(t, "100%")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := etcd.AbortRollout(ctx, c, l, strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
		d.Close(ctx)
	}
	hist, warnings, err := etcd.RolloutHistory(ctx, c, l)
	if err != nil || len(warnings) != 0 || len(hist) != etcd.RolloutHistoryKept {
		t.Fatalf("history: %d rollouts, %v, %v", len(hist), warnings, err)
	}
	for i, r := range hist {
		if want := fmt.Sprintf("r%012d", n-etcd.RolloutHistoryKept+i+1); r.ID != want || r.Reason != "aborted: "+strconv.Itoa(n-etcd.RolloutHistoryKept+i) {
			t.Fatalf("history[%d]: %s (%s), want %s", i, r.ID, r.Reason, want)
		}
	}
}

// loseOnce loses, once, the answer of the first transaction that puts
// key (or deletes it, with del), after it committed (commit) or without
// sending it.
func loseOnce(key string, del, commit bool) func([]clientv3.Op) (bool, bool) {
	done := false
	return func(ops []clientv3.Op) (bool, bool) {
		if done {
			return false, false
		}
		for _, op := range ops {
			if string(op.KeyBytes()) == key && ((del && op.IsDelete()) || (!del && op.IsPut())) {
				done = true
				return true, commit
			}
		}
		return false, false
	}
}

// An abort of a rollout whose state does not parse moves every pinned
// node past its pin even where the table has no current key: an empty
// generation is put in force, the node's desired revision is the
// abort's, and the node applies the empty state.
func TestRolloutAbortUnreadableNoCurrent(t *testing.T) {
	cl, ctx, c, l := startWithV1(t)
	f := startSimFleet(t, cl, "n0", "n1")
	f.waitApplied("n0", "n1")
	d, err := etcd.StartRollout(ctx, c, l, etcd.RolloutSpec{Tables: map[string]map[string][]byte{"objs": values("a", "v2")},
		Steps: steps(t, "1,100%"), StepTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	if _, err := d.Step(ctx); err != nil {
		t.Fatal(err)
	}
	f.waitState(map[string]string{"a": "v2"}, "n0")
	if _, err := c.Txn(ctx).Then(clientv3.OpPut(l.RolloutActive(), "garbled"), clientv3.OpDelete(l.Current("objs", etcd.ScopeAll))).Commit(); err != nil {
		t.Fatal(err)
	}
	ab, err := etcd.AbortRollout(ctx, c, l, "")
	if err != nil {
		t.Fatal(err)
	}
	cur, err := c.Get(ctx, l.Current("objs", etcd.ScopeAll))
	if err != nil || len(cur.Kvs) != 1 || cur.Kvs[0].ModRevision != ab.Revision {
		t.Fatalf("current key after the abort at revision %d: %v, %v", ab.Revision, cur.Kvs, err)
	}
	desired, err := etcd.DesiredRevisions(ctx, c, l, []string{"objs"}, []string{"n0", "n1"})
	if err != nil || desired["n0"] != ab.Revision || desired["n1"] != ab.Revision {
		t.Fatalf("desired revisions %v (%v), want the abort's %d", desired, err, ab.Revision)
	}
	f.waitState(map[string]string{}, "n0", "n1")
	f.waitApplied("n0", "n1")
}

// The abort of a rollout whose state does not parse keeps the history at
// its last RolloutHistoryKept entries too.
func TestRolloutHistoryKeptUnreadable(t *testing.T) {
	cl := startServer(t)
	ctx := ctxT(t)
	c := cl.Client()
	l := etcd.Layout{}
	for i := range etcd.RolloutHistoryKept {
		id := fmt.Sprintf("r%012d", i+1)
		if _, err := c.Put(ctx, l.RolloutHistory()+id, fmt.Sprintf(`{"id":%q,"result":%q,"stepTimeout":"0s","stepPause":"0s"}`, id, etcd.RolloutRolledBack)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Put(ctx, l.RolloutActive(), "garbled"); err != nil {
		t.Fatal(err)
	}
	if _, err := etcd.AbortRollout(ctx, c, l, ""); err != nil {
		t.Fatal(err)
	}
	hist, warnings, err := etcd.RolloutHistory(ctx, c, l)
	if err != nil || len(warnings) != 0 || len(hist) != etcd.RolloutHistoryKept || hist[0].ID != "r000000000002" || hist[len(hist)-1].ID != "unreadable" {
		t.Fatalf("history: %d rollouts (first %+v), %v, %v", len(hist), hist[0], warnings, err)
	}
}

// A live node whose status does not parse could never answer a step: a
// rollout is refused before anything is written, naming its key.
func TestRolloutRefusesUnreadableStatus(t *testing.T) {
	cl, ctx, c, l := startWithV1(t)
	f := startSimFleet(t, cl, "n0", "n1")
	f.waitApplied("n0", "n1")
	put, err := c.Put(ctx, l.Status("n2"), "{not a status")
	if err != nil {
		t.Fatal(err)
	}
	_, err = etcd.StartRollout(ctx, c, l, etcd.RolloutSpec{Tables: map[string]map[string][]byte{"objs": values("a", "v2")}, Steps: steps(t, "1,100%")})
	if err == nil || !strings.Contains(err.Error(), l.Status("n2")+" does not parse") {
		t.Fatalf("a rollout over a node whose status does not parse: %v", err)
	}
	after, err := c.Get(ctx, "/")
	if err != nil || after.Header.Revision != put.Header.Revision {
		t.Fatalf("refused, yet etcd moved from revision %d to %d (%v)", put.Header.Revision, after.Header.Revision, err)
	}
}

// A driver waits for what its reads depend on, the nodes' statuses and
// the rollout's keys, not for every write under the prefix (object
// statuses, records): those written after the revision waited from do
// not end the wait; a status or a rollout key written does.
func TestRolloutWaitWatchesStatusesAndRollout(t *testing.T) {
	c := startEtcd(t)
	ctx := ctxT(t)
	l := etcd.Layout{}
	from, err := c.Get(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	after := from.Header.Revision
	for _, k := range []string{l.ObjectStatus("n0", "objs", "a"), l.Record("n0"), l.Current("objs", etcd.ScopeAll)} {
		if _, err := c.Put(ctx, k, "x"); err != nil {
			t.Fatal(err)
		}
	}
	// The writes above are in etcd's history: a watch from after sees
	// them at once, so a wait that ends by its deadline did not count
	// them (no race with the timer).
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	err = etcd.RolloutWait(wctx, c, l, after)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a wait over writes it does not depend on: %v, want its deadline", err)
	}
	for _, k := range []string{l.Status("n0"), l.RolloutDriver()} {
		put, err := c.Put(ctx, k, "x")
		if err != nil {
			t.Fatal(err)
		}
		if err := etcd.RolloutWait(ctx, c, l, put.Header.Revision-1); err != nil {
			t.Fatalf("a wait over a write of %s: %v", k, err)
		}
	}
}
