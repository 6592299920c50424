package etcd_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/steadystate/steadystate/etcd"
	"github.com/steadystate/steadystate/etcd/etcdtest"
)

// simNode is a simulated agent (startAgent) that can be stopped alone.
type simNode struct {
	*simAgent
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

func startSim(t *testing.T, c *clientv3.Client, l etcd.Layout, name string) *simNode {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	n := &simNode{cancel: cancel}
	n.simAgent = startAgent(ctx, t, c, l, name, &n.wg)
	t.Cleanup(n.stop)
	return n
}

// stop stops the agent cleanly: its status goes at once.
func (n *simNode) stop() {
	n.once.Do(func() {
		n.cancel()
		n.wg.Wait()
		n.pub.Stop(context.Background())
	})
}

// simFleet is a fleet of simulated agents on one table, "objs".
type simFleet struct {
	t     *testing.T
	c     *clientv3.Client
	l     etcd.Layout
	nodes map[string]*simNode
}

// startWithV1 starts an etcd server whose fleet-wide table objs holds
// a=v1, the state the rollout tests start from, and returns it, a context
// for the test, a client and the default layout.
func startWithV1(t *testing.T) (*etcdtest.Cluster, context.Context, *clientv3.Client, etcd.Layout) {
	t.Helper()
	cl := startServer(t)
	ctx := ctxT(t)
	c := cl.Client()
	l := etcd.Layout{}
	if _, err := etcd.Apply(ctx, c, l, "objs", etcd.ScopeAll, values("a", "v1")); err != nil {
		t.Fatal(err)
	}
	return cl, ctx, c, l
}

func startSimFleet(t *testing.T, cl *etcdtest.Cluster, names ...string) *simFleet {
	t.Helper()
	f := &simFleet{t: t, c: cl.Client(), nodes: map[string]*simNode{}}
	for _, name := range names {
		f.nodes[name] = startSim(t, cl.Client(), f.l, name)
	}
	return f
}

// waitState waits until each node's real system (its target) holds
// exactly want.
func (f *simFleet) waitState(want map[string]string, nodes ...string) {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, node := range nodes {
		for {
			got, _ := f.nodes[node].target.snapshot("", "")
			if maps.Equal(got, want) {
				break
			}
			if time.Now().After(deadline) {
				f.t.Fatalf("node %s holds %v, want %v", node, got, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// state is what node's real system holds, and whether it ever held
// name=value.
func (f *simFleet) state(node, name, value string) (map[string]string, bool) {
	return f.nodes[node].target.snapshot(name, value)
}

// waitApplied waits until every node named reports its desired state
// applied.
func (f *simFleet) waitApplied(nodes ...string) {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := etcd.Fleet(f.t.Context(), f.c, f.l)
		if err != nil {
			f.t.Fatal(err)
		}
		desired, err := etcd.DesiredRevisions(f.t.Context(), f.c, f.l, []string{"objs"}, nodes)
		if err != nil {
			f.t.Fatal(err)
		}
		applied := 0
		for _, st := range v.Nodes {
			if d, ok := desired[st.Node]; ok && st.Applied(d) {
				applied++
			}
		}
		if applied == len(nodes) {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%d of %v applied their desired state (%v): %+v", applied, nodes, desired, v.Nodes)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// keys returns the keys under the prefix that contain part.
func keys(t *testing.T, c *clientv3.Client, l etcd.Layout, part string) []string {
	t.Helper()
	resp, err := c.Get(t.Context(), l.Root(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		if strings.Contains(string(kv.Key), part) {
			out = append(out, string(kv.Key))
		}
	}
	return out
}

func steps(t *testing.T, s string) []etcd.StepSize {
	t.Helper()
	st, err := etcd.ParseSteps(s)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// A good change rolled out with steps 1,50%,100% (a canary first)
// reaches exactly the reached cohorts after each step, then every node;
// applies are refused meanwhile; the rollout ends completed, in the
// history, with no pin left, the new generation current and every node's
// desired revision the completion's. On etcd 3.7.3 and on Debian's
// etcd-server 3.4.23.
func TestRolloutCompletes(t *testing.T) {
	for _, srv := range []struct {
		name string
		bin  func(testing.TB) string
	}{{"etcd 3.7.3", etcdtest.Binary}, {"Debian etcd-server", debianEtcd}} {
		t.Run(srv.name, func(t *testing.T) {
			if testing.Short() {
				t.Skip("starts etcd")
			}
			rolloutCompletes(t, etcdtest.StartCluster(t, srv.bin(t), 1))
		})
	}
}

func rolloutCompletes(t *testing.T, cl *etcdtest.Cluster) {
	ctx := ctxT(t)
	c := cl.Client()
	l := etcd.Layout{}
	v1 := map[string]string{"a": "v1", "b": "v1"}
	if _, err := etcd.Apply(ctx, c, l, "objs", etcd.ScopeAll, values("a", "v1", "b", "v1")); err != nil {
		t.Fatal(err)
	}
	names := []string{"n0", "n1", "n2", "n3"}
	f := startSimFleet(t, cl, names...)
	f.waitState(v1, names...)
	f.waitApplied(names...)

	v2 := map[string]string{"a": "v2", "b": "v1", "c": "v2"}
	var switched []etcd.RolloutStep
	d, err := etcd.StartRollout(ctx, c, l, etcd.RolloutSpec{
		Tables: map[string]map[string][]byte{"objs": values("a", "v2", "b", "v1", "c", "v2")},
		Steps:  steps(t, "1,50%,100%"), Canary: []string{"n2"}, StepTimeout: 30 * time.Second, Source: "v2.yaml",
		Progress: func(st etcd.RolloutStep) { switched = append(switched, st) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	if pins := keys(t, c, l, "/pin/"); len(pins) != 0 {
		t.Fatalf("pins before the first step: %v", pins)
	}
	r := d.Rollout()
	if r.ID != "r000000000001" || !equal(r.Nodes, []string{"n2", "n0", "n1", "n3"}) || !equal(r.Sizes, []int{1, 2, 4}) || r.MaxFailed != 0 {
		t.Fatalf("rollout %+v", r)
	}
	if v, err := c.Get(ctx, l.VersionKey()); err != nil || string(v.Kvs[0].Value) != "3" {
		t.Fatalf("layout version after the start: %v %v", v, err)
	}

	// Each step: its cohort has the new state, the others never had it.
	for i, want := range [][]string{{"n2"}, {"n2", "n0"}, {"n2", "n0", "n1", "n3"}} {
		st, err := d.Step(ctx)
		if err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
		if st.Result != etcd.StepPassed || !equal(st.ACK, want) || len(st.NACK)+len(st.NoAnswer) != 0 || st.Reached != len(want) {
			t.Fatalf("step %d: %+v", i+1, st)
		}
		if len(switched) != i+1 || switched[i].Result != etcd.StepSwitched || !equal(switched[i].New, want[len(want)-len(switched[i].New):]) {
			t.Fatalf("step %d switched: %+v", i+1, switched)
		}
		for _, node := range names {
			got, ever := f.state(node, "a", "v2")
			if in := contains(want, node); in && !maps.Equal(got, v2) {
				t.Fatalf("step %d: reached node %s holds %v", i+1, node, got)
			} else if !in && (ever || !maps.Equal(got, v1)) {
				t.Fatalf("step %d: node %s, not reached, holds %v (ever a=v2: %v)", i+1, node, got, ever)
			}
		}
		if i == 0 {
			// One rollout at a time: an apply is refused, naming it.
			if _, err := etcd.Apply(ctx, c, l, "objs", etcd.ScopeAll, values("z", "1")); !errors.Is(err, etcd.ErrRolloutActive) || !strings.Contains(err.Error(), "r000000000001") {
				t.Fatalf("apply during the rollout: %v", err)
			}
			st, err := etcd.RolloutStatus(ctx, c, l)
			if err != nil || st == nil || st.State != etcd.RolloutRunning || st.Driver == nil || st.Rollout.Step != 1 || len(st.Now) != 1 || st.Now[0].Answer != etcd.AnswerACK {
				t.Fatalf("status after step 1: %+v, %v", st, err)
			}
		}
	}
	r = d.Rollout()
	if !d.Done() || r.Result != etcd.RolloutCompleted || r.Revision == 0 || len(r.Passed) != 3 {
		t.Fatalf("after the last step: %+v", r)
	}
	if pins := keys(t, c, l, "/pin/"); len(pins) != 0 {
		t.Fatalf("pins left: %v", pins)
	}
	// A small change goes as a delta, written into the generation in
	// force by the completion.
	if gens, deltas := keys(t, c, l, "/gen/"), keys(t, c, l, "/delta/"); len(gens) != 3 || !strings.Contains(gens[0], r.Tables[0].Old) ||
		!strings.HasPrefix(r.Tables[0].New, "d") || len(deltas) != 0 {
		t.Fatalf("generations left: %v, deltas %v (tables %+v)", gens, deltas, r.Tables)
	}
	for _, node := range names {
		if rev, err := etcd.DesiredRevision(ctx, c, l, []string{"objs"}, node); err != nil || rev != r.Revision {
			t.Fatalf("node %s: desired revision %d (%v), want the completion's %d", node, rev, err, r.Revision)
		}
	}
	f.waitApplied(names...)
	hist, warnings, err := etcd.RolloutHistory(ctx, c, l)
	if err != nil || len(warnings) != 0 || len(hist) != 1 || hist[0].ID != r.ID || hist[0].Result != etcd.RolloutCompleted ||
		hist[0].Revision != r.Revision || hist[0].Source != "v2.yaml" || len(hist[0].Passed) != 3 {
		t.Fatalf("history %+v, %v, %v", hist, warnings, err)
	}
	if st, err := etcd.RolloutStatus(ctx, c, l); st != nil || err != nil {
		t.Fatalf("status after: %+v, %v", st, err)
	}
	// Applies go again.
	if _, err := etcd.Apply(ctx, c, l, "objs", etcd.ScopeAll, values("a", "v3")); err != nil {
		t.Fatal(err)
	}
	f.waitState(map[string]string{"a": "v3"}, names...)
}

// A change a node refuses (a NACK) halts at the canary: the rollout is
// rolled back, the canary holds the previous state again and ACKs it, no
// other node ever had the change, the error names the canary and its
// error; the history says so. With --max-failures 1, the canary's NACK is
// tolerated, and the next step's NACKs halt it.
func TestRolloutHaltsOnNACK(t *testing.T) {
	cl, ctx, c, l := startWithV1(t)
	names := []string{"n0", "n1", "n2", "n3"}
	f := startSimFleet(t, cl, names...)
	v1 := map[string]string{"a": "v1"}
	f.waitState(v1, names...)
	f.waitApplied(names...)
	bad := map[string]map[string][]byte{"objs": values("a", "v1", "new", "v2", "bad", "fail-1")}

	d, err := etcd.StartRollout(ctx, c, l, etcd.RolloutSpec{Tables: bad, Steps: steps(t, "1,100%"), Canary: []string{"n1"}, StepTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	var each []etcd.RolloutStep
	r, err := d.Run(ctx, func(st etcd.RolloutStep) { each = append(each, st) })
	if !errors.Is(err, etcd.ErrRolloutHalted) || !strings.Contains(err.Error(), "n1: ") || !strings.Contains(err.Error(), `refused value "fail-1"`) {
		t.Fatalf("run: %v", err)
	}
	if r.Result != etcd.RolloutRolledBack || len(each) != 1 || each[0].Result != etcd.StepHalted || len(each[0].NACK) != 1 || each[0].NACK[0].Node != "n1" ||
		len(r.Failing) != 1 || r.Failing[0].Answer != etcd.AnswerNACK {
		t.Fatalf("rollout %+v, steps %+v", r, each)
	}
	back := d.RolledBack()
	if len(back) != 1 || back[0].Node != "n1" || back[0].Answer != etcd.AnswerACK || back[0].Desired < r.Revision {
		t.Fatalf("rolled back: %+v (rollback at %d)", back, r.Revision)
	}
	f.waitState(v1, names...)
	for _, node := range names {
		if _, ever := f.state(node, "new", "v2"); ever != (node == "n1") {
			t.Errorf("node %s ever had new=v2: %v", node, ever)
		}
	}
	if pins, gens, deltas := keys(t, c, l, "/pin/"), keys(t, c, l, "/gen/"), keys(t, c, l, "/delta/"); len(pins) != 0 || len(gens) != 1 ||
		!strings.Contains(gens[0], r.Tables[0].Old) || len(deltas) != 0 {
		t.Fatalf("after the rollback: pins %v, generations %v, deltas %v", pins, gens, deltas)
	}
	f.waitApplied(names...)

	// Tolerating one NACK: the canary's passes, the second step's three
	// NACKs halt it.
	d, err = etcd.StartRollout(ctx, c, l, etcd.RolloutSpec{Tables: bad, Steps: steps(t, "1,100%"), Canary: []string{"n1"},
		MaxFailures: etcd.FailureLimit{Count: 1}, StepTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	each = nil
	r, err = d.Run(ctx, func(st etcd.RolloutStep) { each = append(each, st) })
	if !errors.Is(err, etcd.ErrRolloutHalted) || len(each) != 2 || each[0].Result != etcd.StepPassed || len(each[0].NACK) != 1 ||
		each[1].Result != etcd.StepHalted || !strings.Contains(r.Reason, "step 2 of 2 (100%)") || !strings.Contains(r.Reason, "more than --max-failures 1") {
		t.Fatalf("run: %v; steps %+v; rollout %+v", err, each, r)
	}
	f.waitState(v1, names...)
	hist, _, err := etcd.RolloutHistory(ctx, c, l)
	if err != nil || len(hist) != 2 || hist[0].Result != etcd.RolloutRolledBack || hist[1].Result != etcd.RolloutRolledBack ||
		!strings.Contains(hist[0].Reason, "step 1 of 2 (1): 1 node(s) failed") {
		t.Fatalf("history: %+v, %v", hist, err)
	}
}

// A node of the cohort that stops during its step never answers: the
// step times out and halts (its last status, applied at its old desired
// state, is not an ACK). A node that joins mid-rollout reads the state in
// force for nodes not reached; it gets the new state when the rollout
// completes.
func TestRolloutTimeoutAndJoiner(t *testing.T) {
	cl, ctx, c, l := startWithV1(t)
	names := []string{"n0", "n1", "n2"}
	f := startSimFleet(t, cl, names...)
	v1, v2 := map[string]string{"a": "v1"}, map[string]string{"a": "v2"}
	f.waitState(v1, names...)
	f.waitApplied(names...)

	d, err := etcd.StartRollout(ctx, c, l, etcd.RolloutSpec{Tables: map[string]map[string][]byte{"objs": values("a", "v2")},
		Steps: steps(t, "1,100%"), Canary: []string{"n1"}, StepTimeout: 2 * time.Second,
		Progress: func(etcd.RolloutStep) { f.nodes["n1"].stop() }})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	start := time.Now()
	r, err := d.Run(ctx, nil)
	if !errors.Is(err, etcd.ErrRolloutHalted) || !strings.Contains(r.Reason, "not acknowledged within 2s: n1: not live") || time.Since(start) < 2*time.Second {
		t.Fatalf("run: %v (%v)", err, time.Since(start))
	}
	f.waitState(v1, "n0", "n2")

	d, err = etcd.StartRollout(ctx, c, l, etcd.RolloutSpec{Tables: map[string]map[string][]byte{"objs": values("a", "v2")},
		Steps: steps(t, "1,100%"), StepTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	if _, err := d.Step(ctx); err != nil {
		t.Fatal(err)
	}
	f.nodes["n9"] = startSim(t, c, l, "n9")
	f.waitApplied("n9")
	f.waitState(v1, "n2", "n9")
	f.waitState(v2, "n0")
	if r, err := d.Run(ctx, nil); err != nil || len(r.Nodes) != 2 {
		t.Fatalf("run: %+v, %v", r, err)
	}
	f.waitState(v2, "n0", "n2", "n9")
	f.waitApplied("n0", "n2", "n9")
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
