package fleetcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/steadystate/steadystate/etcd"
	"github.com/steadystate/steadystate/etcd/etcdtest"
)

// fakeNode answers as an agent would, without one: whenever its desired
// state changes it reports that revision applied, or, while a rollout
// pins it and nackPinned is set, an object in Error.
func (f *fleetFixture) fakeNode(name string, nackPinned bool) {
	f.t.Helper()
	p := f.node(name, etcd.NodeStatus{})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	f.t.Cleanup(func() { cancel(); <-stopped })
	events := f.c.Watch(ctx, f.l.Desired(), clientv3.WithPrefix())
	go func() {
		defer close(stopped)
		for {
			rev, err := etcd.DesiredRevision(ctx, f.c, f.l, testTables, name)
			if err != nil {
				return
			}
			pins, err := f.c.Get(ctx, f.l.Pin("rules", name))
			if err != nil {
				return
			}
			st := etcd.NodeStatus{Revision: rev, Objects: done(3)}
			if nackPinned && len(pins.Kvs) > 0 {
				st.Objects = map[string]int{"Done": 2, "Error": 1}
				st.Errors = []string{"rules odd: iptables: Bad rule"}
			}
			p.Publish(st)
			if _, ok := <-events; !ok {
				return
			}
		}
	}()
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "desired.txt")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// `fleet apply --rollout`: bad flags are usage errors before anything is
// read or written; a good rollout prints its steps and completes (exit
// 0); one a node NACKs halts at that node, names it and its error, rolls
// back and says the node is back (exit 1); the history lists both, as a
// table, JSON and YAML.
func TestFleetApplyRollout(t *testing.T) {
	cl := etcdtest.StartCluster(t, etcdtest.Binary(t), 1)
	f := newFleetFixture(t, cl)
	for _, name := range []string{"n0", "n1", "n2"} {
		f.fakeNode(name, name == "n0")
	}
	good := writeFile(t, "sysctls o sysctls\nroutes o routes\nroutes new v2\nrules o rules\n")
	bad := writeFile(t, "sysctls o sysctls\nroutes o routes\nrules o rules\nrules odd bad\n")

	// What applies and rollouts write: the desired state, the rollout's
	// keys, the layout version (the nodes write their statuses meanwhile).
	written := func() (rev int64) {
		resp, err := f.c.Get(t.Context(), f.l.Root(), clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range resp.Kvs {
			if k := string(kv.Key); strings.HasPrefix(k, f.l.Desired()) || strings.Contains(k, "/rollout/") || k == f.l.VersionKey() {
				rev = max(rev, kv.ModRevision)
			}
		}
		return rev
	}
	before := written()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--rollout", "1,100%", "--node", "n1"}, "--rollout with --node"},
		{[]string{"--canary-nodes", "n1"}, "--canary-nodes goes with --rollout"},
		{[]string{"--rollout", "1,50%"}, "must end in 100%"},
		{[]string{"--rollout", "1,x,100%"}, `step 2 ("x")`},
		{[]string{"--rollout", "100%", "--max-failures", "lots"}, "--max-failures"},
		{[]string{"--rollout", "100%", "--step-timeout", "0s"}, "--step-timeout 0s: must be positive"},
	} {
		code, out, errOut := f.run(append([]string{"apply", "-f", good}, tc.args...)...)
		if code != ExitUsage || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "not applied") {
			t.Errorf("apply %v: exit %d, %s%s; want %d and %q", tc.args, code, out, errOut, ExitUsage, tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--rollout", "5,100%"}, "step 1 (5) reaches 5 nodes: more than the 3 live nodes"},
		{[]string{"--rollout", "1,100%", "--canary-nodes", "n7"}, `canary node "n7" is not a live node`},
	} {
		if code, out, errOut := f.run(append([]string{"apply", "-f", good}, tc.args...)...); code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("apply %v: exit %d, %s%s; want 1 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
	if after := written(); after != before {
		t.Fatalf("refused applies wrote at revision %d (the last write before them: %d)", after, before)
	}

	code, out, errOut := f.run("apply", "-f", good, "--rollout", "1,100%", "--canary-nodes", "n2", "--step-timeout", "20s")
	t.Logf("a good rollout:\n%s%s", out, errOut)
	for _, want := range []string{"rollout r000000000001 of " + good + ": 3 live nodes in order n2, n0, n1; steps 1,100% reach 1, 3",
		"step 1/2 (1): switched n2; waiting for 1 node(s)\n", "step 1/2 (1): passed after ", ": 1 ACK (n2), 0 NACK\n",
		"step 2/2 (100%): switched n0, n1; waiting for 3 node(s)\n", ": 3 ACK (n2, n0, n1), 0 NACK\n",
		"completed: every step passed; the new state is in force fleet-wide at revision "} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("a good rollout: exit %d; no %q in:\n%s%s", code, want, out, errOut)
		}
	}
	if got := fleetState(t, f.c, f.l); !sameTables(got, desiredTables(t, "sysctls o sysctls\nroutes o routes\nroutes new v2\nrules o rules\n")) {
		t.Fatalf("in force after the rollout: %v", got)
	}

	code, out, errOut = f.run("apply", "-f", bad, "--rollout", "1,100%", "--canary-nodes", "n0", "--step-timeout", "20s")
	t.Logf("a rollout n0 refuses:\n%s%s", out, errOut)
	for _, want := range []string{"step 1/2 (1): halted after ", "0 ACK, 1 NACK\n", "  NACK n0: rules odd: iptables: Bad rule\n",
		"halted, rolled back at revision ", "step 1 of 2 (1): 1 node(s) failed, more than --max-failures 0 (0): n0: rules odd: iptables: Bad rule",
		"  n0: back at the previous state (applied at revision "} {
		if code != RolloutHalted || !strings.Contains(out+errOut, want) {
			t.Fatalf("a rollout n0 refuses: exit %d; no %q in:\n%s%s", code, want, out, errOut)
		}
	}
	if got := fleetState(t, f.c, f.l); got["rules"]["odd"] != nil {
		t.Fatalf("the refused rule is in force: %v", got)
	}

	code, out, _ = f.run("rollout", "history")
	t.Logf("rollout history:\n%s", out)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 3 || !strings.Contains(lines[1], "r000000000001") ||
		!strings.Contains(lines[1], "completed") || !strings.Contains(lines[2], "halted, rolled back (step 1 of 2") || !strings.Contains(lines[2], "n0 NACK: rules odd") {
		t.Fatalf("rollout history: exit %d\n%s", code, out)
	}
	code, out, _ = f.run("rollout", "history", "--format", "json")
	var hist struct{ Rollouts []etcd.Rollout }
	if err := json.Unmarshal([]byte(out), &hist); code != 0 || err != nil || len(hist.Rollouts) != 2 || hist.Rollouts[1].StepTimeout != 20*time.Second ||
		hist.Rollouts[1].Failing[0].Node != "n0" {
		t.Fatalf("rollout history --format json: exit %d, %v\n%s", code, err, out)
	}
	if code, out, _ = f.run("rollout", "history", "--format", "yaml"); code != 0 || !strings.Contains(out, "stepTimeout: 20s") || !strings.Contains(out, "result: halted, rolled back") {
		t.Fatalf("rollout history --format yaml: exit %d\n%s", code, out)
	}
	if code, out, _ = f.run("rollout", "status"); code != 0 || out != "no rollout under way\n" {
		t.Fatalf("rollout status with none: exit %d\n%s", code, out)
	}
}

// A rollout under way refuses applies, naming it; status says running,
// then paused once its driver stops; resume is refused while it is
// driven; abort rolls it back; apply --force aborts one first. A state
// that does not parse is named.
func TestFleetRolloutControl(t *testing.T) {
	cl := etcdtest.StartCluster(t, etcdtest.Binary(t), 1)
	f := newFleetFixture(t, cl)
	for _, name := range []string{"n0", "n1"} {
		f.fakeNode(name, false)
	}
	file := writeFile(t, "sysctls o sysctls\nroutes o routes\nroutes new v2\nrules o rules\n")
	start := func() *etcd.RolloutDriver {
		d, err := etcd.StartRollout(t.Context(), f.c, f.l, etcd.RolloutSpec{Tables: desiredTables(t, "routes new v3\n"),
			Steps: []etcd.StepSize{{Count: 1}, {Percent: 100}}, StepTimeout: 20 * time.Second, Driver: "the test", Source: "v3"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close(context.Background()) })
		if _, err := d.Step(t.Context()); err != nil {
			t.Fatal(err)
		}
		return d
	}
	d := start()
	if code, _, errOut := f.run("apply", "-f", file); code != 1 || !strings.Contains(errOut, "a rollout is under way: rollout r000000000001") {
		t.Fatalf("apply during a rollout: exit %d\n%s", code, errOut)
	}
	code, out, _ := f.run("rollout", "status")
	t.Logf("rollout status:\n%s", out)
	for _, want := range []string{"rollout r000000000001 of v3, started ", ": running (driven by the test since ", "steps 1,100% reach 1, 2 of 2 nodes (n0, n1); at step 2 of 2; 1 node(s) switched",
		"NODE  ANSWER", "n0    ACK "} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("rollout status: exit %d; no %q in\n%s", code, want, out)
		}
	}
	if code, _, errOut := f.run("rollout", "resume"); code != 1 || !strings.Contains(errOut, "the rollout has a live driver: rollout r000000000001 is driven by the test") {
		t.Fatalf("resume while driven: exit %d\n%s", code, errOut)
	}
	d.Close(t.Context())
	if code, out, _ := f.run("rollout", "status", "--format", "json"); code != 0 || !strings.Contains(out, `"state":"paused"`) {
		t.Fatalf("rollout status --format json after the driver stopped: exit %d\n%s", code, out)
	}
	code, out, _ = f.run("rollout", "abort", "--reason", "a test")
	if code != 0 || !strings.Contains(out, "rollout r000000000001 halted, rolled back at revision ") || !strings.Contains(out, "(aborted: a test)") ||
		!strings.Contains(out, "  n0: back at the previous state (applied at revision ") {
		t.Fatalf("rollout abort: exit %d\n%s", code, out)
	}

	start()
	code, out, errOut := f.run("apply", "-f", file, "--force")
	if code != 0 || !strings.Contains(out, "--force: aborted rollout r000000000002 at revision ") || !strings.Contains(out, "in force at revision") {
		t.Fatalf("apply --force: exit %d\n%s%s", code, out, errOut)
	}

	if _, err := f.c.Put(t.Context(), f.l.RolloutActive(), "{garbage"); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := f.run("rollout", "status"); code != 1 || !strings.Contains(errOut, "the rollout's state in etcd does not parse: "+f.l.RolloutActive()) {
		t.Fatalf("status of an unreadable rollout: exit %d\n%s", code, errOut)
	}
	if code, out, errOut := f.run("rollout", "abort"); code != 0 || !strings.Contains(out, "did not parse") {
		t.Fatalf("abort of an unreadable rollout: exit %d\n%s%s", code, out, errOut)
	}
}

// An abort whose rollout's live driver writes between the abort's read
// and its write is retried, and said: once (one retry, rolled back), or
// every time (it gives up after 3 retries; the rollout is still under
// way).
func TestFleetRolloutAbortRetries(t *testing.T) {
	cl := etcdtest.StartCluster(t, etcdtest.Binary(t), 1)
	for _, tc := range []struct {
		conflicts int
		retries   int
		ok        bool
	}{
		{0, 0, true},
		{1, 1, true},
		{4, 3, false},
	} {
		t.Run(fmt.Sprintf("%d conflicts", tc.conflicts), func(t *testing.T) {
			f := newFleetFixture(t, cl)
			f.fakeNode("n0", false)
			d, err := etcd.StartRollout(t.Context(), f.c, f.l, etcd.RolloutSpec{Tables: desiredTables(t, "routes new v3\n"),
				Steps: []etcd.StepSize{{Percent: 100}}, StepTimeout: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close(context.Background())
			w := cl.Client()
			// After each of the abort's reads (the transaction that reads
			// the layout version), the driver writes its state, unchanged.
			n := 0
			w.KV = &readHookKV{KV: w.KV, key: f.l.VersionKey(), after: func() {
				if n++; n > tc.conflicts {
					return
				}
				active, err := f.c.Get(t.Context(), f.l.RolloutActive())
				if err == nil && len(active.Kvs) == 1 {
					_, err = f.c.Put(t.Context(), f.l.RolloutActive(), string(active.Kvs[0].Value))
				}
				if err != nil {
					t.Error(err)
				}
			}}
			var said []int
			r, err := abortWhole(t.Context(), w, f.l, "test", func(attempt int, err error) {
				if !errors.Is(err, etcd.ErrConflict) {
					t.Errorf("retry %d after %v", attempt, err)
				}
				said = append(said, attempt)
			})
			if len(said) != tc.retries || (err == nil) != tc.ok {
				t.Fatalf("retries %v, %v; want %d, ok %v", said, err, tc.retries, tc.ok)
			}
			st, serr := etcd.RolloutStatus(t.Context(), f.c, f.l)
			if tc.ok {
				if r.Result != etcd.RolloutRolledBack || serr != nil || st != nil {
					t.Fatalf("aborted: %+v; status %+v, %v", r, st, serr)
				}
				return
			}
			if !errors.Is(err, etcd.ErrConflict) || !strings.Contains(err.Error(), "gave up after 3 retries") || serr != nil || st == nil {
				t.Fatalf("gave up: %v; status %+v, %v", err, st, serr)
			}
		})
	}
}

// readHookKV calls after once each transaction that reads key committed.
type readHookKV struct {
	clientv3.KV
	key   string
	after func()
}

func (k *readHookKV) Txn(ctx context.Context) clientv3.Txn {
	return &readHookTxn{Txn: k.KV.Txn(ctx), k: k}
}

type readHookTxn struct {
	clientv3.Txn
	k    *readHookKV
	read bool
}

func (t *readHookTxn) If(cs ...clientv3.Cmp) clientv3.Txn { t.Txn = t.Txn.If(cs...); return t }
func (t *readHookTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	for _, op := range ops {
		t.read = t.read || (op.IsGet() && string(op.KeyBytes()) == t.k.key)
	}
	t.Txn = t.Txn.Then(ops...)
	return t
}
func (t *readHookTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }
func (t *readHookTxn) Commit() (*clientv3.TxnResponse, error) {
	resp, err := t.Txn.Commit()
	if t.read {
		t.k.after()
	}
	return resp, err
}

// During a rollout `fleet status` names it (running or paused, the step,
// the nodes switched) and claims no one revision, since the nodes not
// reached hold the old state; `fleet status --wait` is not done while it
// is under way, and says why; once it completed, it is.
func TestFleetStatusDuringRollout(t *testing.T) {
	cl := etcdtest.StartCluster(t, etcdtest.Binary(t), 1)
	f := newFleetFixture(t, cl)
	for _, name := range []string{"n0", "n1"} {
		f.fakeNode(name, false)
	}
	if code, out, errOut := f.run("status", "--wait", "--timeout", "30s"); code != 0 {
		t.Fatalf("before the rollout: exit %d\n%s%s", code, out, errOut)
	}
	d, err := etcd.StartRollout(t.Context(), f.c, f.l, etcd.RolloutSpec{Tables: desiredTables(t, "routes new v3\n"),
		Steps: []etcd.StepSize{{Count: 1}, {Percent: 100}}, StepTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	if _, err := d.Step(t.Context()); err != nil {
		t.Fatal(err)
	}
	line := "rollout r000000000001 running: step 2 of 2, 1 of 2 nodes switched to its new state"
	want := "applied on 2 of 2 nodes, each at its own desired state (rollout r000000000001 under way)"
	code, out, errOut := f.run("status")
	if code != 0 || !strings.Contains(out, line) || lastLine(out) != want {
		t.Fatalf("status during the rollout: exit %d; want %q and last line %q\n%s%s", code, line, want, out, errOut)
	}
	code, out, _ = f.run("status", "--format", "json")
	var rep Report
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || rep.Rollout == nil ||
		*rep.Rollout != (RolloutReport{ID: "r000000000001", State: etcd.RolloutRunning, Step: 2, Steps: 2, Switched: 1, Nodes: 2}) {
		t.Fatalf("status --format json during the rollout: exit %d, %v: %+v\n%s", code, err, rep.Rollout, out)
	}
	code, out, errOut = f.run("status", "--wait", "--timeout", "500ms")
	if code != WaitTimedOut || !strings.Contains(errOut, "waiting for the rollout under way to finish: "+line) || lastLine(out) != want {
		t.Fatalf("status --wait during the rollout: exit %d, want %d\n%s%s", code, WaitTimedOut, out, errOut)
	}
	d.Close(t.Context())
	if code, out, _ := f.run("status"); code != 0 || !strings.Contains(out, "rollout r000000000001 paused: step 2 of 2") {
		t.Fatalf("status of a paused rollout: exit %d\n%s", code, out)
	}
	d, err = etcd.ResumeRollout(t.Context(), f.c, f.l, etcd.ResumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	r, err := d.Run(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut = f.run("status", "--wait", "--timeout", "30s")
	if want := fmt.Sprintf("applied on 2 of 2 nodes at revision %d", r.Revision); code != 0 || lastLine(out) != want || strings.Contains(out, "rollout r") {
		t.Fatalf("status --wait after the rollout: exit %d, want 0 and %q\n%s%s", code, want, out, errOut)
	}
}
