package etcd_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/steadystate/steadystate/etcd"
)

// publish starts a publisher of node on c, quick to write, with the
// status given; it is stopped when the test ends (an error then is
// ignored: the test may have closed c).
func publish(t *testing.T, c *clientv3.Client, l etcd.Layout, node string, ttl time.Duration, st etcd.NodeStatus) *etcd.Publisher {
	t.Helper()
	p, err := etcd.StartPublisher(ctxT(t), etcd.PublisherConfig{Client: c, Layout: l, Node: node, TTL: ttl, MinInterval: 10 * time.Millisecond}, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(t.Context()) })
	return p
}

func names(nodes []etcd.NodeStatus) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.Node)
	}
	return out
}

func warningKeys(ws []etcd.Warning) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Key)
	}
	slices.Sort(out)
	return out
}

// Garbage under the prefix hides nothing: a status that is not JSON, a
// foreign key under the status or record prefix, a record that is not
// JSON, a status naming another node, and a malformed object status key
// are each named in a warning, and every good node is listed, under the
// name of its key.
func TestFleetViewSkipsGarbage(t *testing.T) {
	c := startServer(t).Client()
	ctx := ctxT(t)
	l := etcd.Layout{}
	publish(t, c, l, "n1", 0, etcd.NodeStatus{Revision: 5, Objects: map[string]int{"Done": 1}})
	for k, v := range map[string]string{
		l.Status("n2"):                    "garbage{",
		l.StatusPrefix() + "a/b":          `{"node":"a","revision":5}`,
		l.Status("n3"):                    `{"node":"other","revision":5,"objects":{"Done":2}}`,
		l.Record("n4"):                    "not a record",
		l.RecordPrefix() + "x/y":          `{"node":"x"}`,
		l.ObjectStatusPrefix("n1") + "t":  `{"kind":"Done"}`,
		l.ObjectStatus("n1", "t", "good"): `{"kind":"Error","error":"boom"}`,
		l.ObjectStatus("n1", "t", "bad"):  `not json`,
	} {
		if _, err := c.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	v, err := etcd.Fleet(ctx, c, l)
	if err != nil {
		t.Fatalf("a view with garbage: %v", err)
	}
	if got := names(v.Nodes); !slices.Equal(got, []string{"n1", "n2", "n3"}) || v.Nodes[2].Objects["Done"] != 2 ||
		v.Nodes[1].Revision != 0 || len(v.Nodes[1].Errors) != 1 || !strings.Contains(v.Nodes[1].Errors[0], "status unreadable") {
		t.Fatalf("nodes %+v, want n1, n2 (its status unknown: listed, never hidden) and n3 (named by its key)", v.Nodes)
	}
	if len(v.Lost) != 0 {
		t.Fatalf("lost %+v, want none (n4's record is garbage)", v.Lost)
	}
	want := []string{l.RecordPrefix() + "x/y", l.Record("n4"), l.StatusPrefix() + "a/b", l.Status("n2"), l.Status("n3")}
	slices.Sort(want)
	if got := warningKeys(v.Warnings); !slices.Equal(got, want) {
		t.Fatalf("warnings on %v, want %v: %v", got, want, v.Warnings)
	}
	for _, w := range v.Warnings {
		switch w.Key {
		case l.Status("n3"):
			if !strings.Contains(w.String(), `names node "other"`) {
				t.Errorf("warning %q", w)
			}
		case l.Status("n2"):
			if !strings.Contains(w.String(), "node n2 is listed, its status unknown") {
				t.Errorf("warning %q", w)
			}
		default:
			if !strings.HasSuffix(w.String(), "skipped") || !strings.HasPrefix(w.String(), w.Key+": ") {
				t.Errorf("warning %q does not name the key and say it is skipped", w)
			}
		}
	}
	if got := v.Summary(5); got != "applied on 2 of 3 nodes at revision 5" {
		t.Fatalf("summary %q", got)
	}

	objs, warnings, err := etcd.ObjectStatusesWarn(ctx, c, l, "n1")
	if err != nil || len(objs["t"]) != 1 || objs["t"]["good"].Error != "boom" {
		t.Fatalf("object statuses %v, %v", objs, err)
	}
	if got := warningKeys(warnings); !slices.Equal(got, []string{l.ObjectStatusPrefix("n1") + "t", l.ObjectStatus("n1", "t", "bad")}) {
		t.Fatalf("object status warnings %v", warnings)
	}
}

// A node whose lease expires (its agent killed: the keep-alives stop) is
// lost: listed with its last status, when it was last seen and at which
// revision, counted in the summary, until it is forgotten; a live node
// cannot be forgotten, nor an unknown one; a lost node's name is free for
// a new agent, which makes it live again. A node that stops cleanly is
// not lost.
func TestLostNode(t *testing.T) {
	cl := startServer(t)
	c := cl.Client()
	ctx := ctxT(t)
	l := etcd.Layout{}
	publish(t, c, l, "live", 0, etcd.NodeStatus{Revision: 9, Objects: map[string]int{"Done": 1}})

	// The node that dies has a client of its own: closing it stops the
	// keep-alives, as a SIGKILL would.
	dying := cl.Client()
	before := time.Now()
	p := publish(t, dying, l, "dying", time.Second, etcd.NodeStatus{})
	p.Publish(etcd.NodeStatus{Revision: 9, Objects: map[string]int{"Done": 3}})
	waitView(t, c, l, "dying at revision 9", func(v etcd.View) bool { return len(v.Nodes) == 2 && v.Nodes[0].Revision == 9 })
	// Both read at one revision: the publisher may write them again
	// meanwhile (the record is rewritten with every status).
	both, err := c.Txn(ctx).Then(clientv3.OpGet(l.Record("dying")), clientv3.OpGet(l.Status("dying"))).Commit()
	if err != nil {
		t.Fatal(err)
	}
	rec, status := both.Responses[0].GetResponseRange(), both.Responses[1].GetResponseRange()
	if len(rec.Kvs) != 1 || len(status.Kvs) != 1 || status.Kvs[0].ModRevision != rec.Kvs[0].ModRevision || status.Kvs[0].Lease == 0 || rec.Kvs[0].Lease != 0 {
		t.Fatalf("the record is not written with the status, without a lease: status %v, record %v", status.Kvs, rec.Kvs)
	}
	if err := etcd.Forget(ctx, c, l, "dying"); !errors.Is(err, etcd.ErrNodeLive) || !strings.Contains(err.Error(), "stop it first") {
		t.Fatalf("forgetting a live node: %v", err)
	}

	dying.Close()
	v := waitView(t, c, l, "dying lost", func(v etcd.View) bool { return len(v.Nodes) == 1 })
	if len(v.Lost) != 1 {
		t.Fatalf("lost %+v, want dying", v.Lost)
	}
	// The record as the node left it (its last write may come after the
	// read above).
	last, err := c.Get(ctx, l.Record("dying"))
	if err != nil || len(last.Kvs) != 1 {
		t.Fatalf("dying's record after its death: %v", err)
	}
	seen := last.Kvs[0].ModRevision
	lost := v.Lost[0]
	if lost.Node != "dying" || lost.Revision != 9 || lost.Objects["Done"] != 3 || lost.SeenRevision != seen ||
		lost.LastSeen.Before(before.Add(-time.Second)) || lost.LastSeen.After(time.Now()) {
		t.Fatalf("lost node %+v (seen at revision %d, after %v)", lost, seen, before)
	}
	// Lost counts in M, never in N, and is said.
	if got, want := v.Summary(9), "applied on 1 of 2 nodes at revision 9 (1 lost)"; got != want {
		t.Fatalf("summary %q, want %q", got, want)
	}
	// It stays: a later view still lists it.
	if v, err := etcd.Fleet(ctx, c, l); err != nil || len(v.Lost) != 1 {
		t.Fatalf("lost node gone by itself: %+v, %v", v, err)
	}

	// Its name is free: a new agent as "dying" claims it, and it is live.
	back := publish(t, c, l, "dying", 0, etcd.NodeStatus{Revision: 9, Objects: map[string]int{"Done": 3}})
	v = waitView(t, c, l, "dying back", func(v etcd.View) bool { return len(v.Nodes) == 2 })
	if len(v.Lost) != 0 || v.Summary(9) != "applied on 2 of 2 nodes at revision 9" {
		t.Fatalf("after dying came back: %q, lost %+v", v.Summary(9), v.Lost)
	}
	// It stops cleanly: not lost, no record left.
	if err := back.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	v = waitView(t, c, l, "dying gone", func(v etcd.View) bool { return len(v.Nodes) == 1 })
	if len(v.Lost) != 0 {
		t.Fatalf("a clean stop left the node lost: %+v", v.Lost)
	}
	if resp, err := c.Get(ctx, l.Record("dying")); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("a clean stop left the record: %v, %v", resp.Kvs, err)
	}
	if err := etcd.Forget(ctx, c, l, "dying"); !errors.Is(err, etcd.ErrNodeUnknown) {
		t.Fatalf("forgetting a node that left: %v", err)
	}

	// Lost again (a second death), then forgotten.
	dying2 := cl.Client()
	publish(t, dying2, l, "dying", time.Second, etcd.NodeStatus{Revision: 9})
	waitView(t, c, l, "dying live", func(v etcd.View) bool { return len(v.Nodes) == 2 })
	dying2.Close()
	waitView(t, c, l, "dying lost", func(v etcd.View) bool { return len(v.Lost) == 1 })
	if err := etcd.Forget(ctx, c, l, "dying"); err != nil {
		t.Fatal(err)
	}
	v, err = etcd.Fleet(ctx, c, l)
	if err != nil || len(v.Lost) != 0 || len(v.Nodes) != 1 || v.Summary(9) != "applied on 1 of 1 nodes at revision 9" {
		t.Fatalf("after forget: %+v, %v", v, err)
	}
	if err := etcd.Forget(ctx, c, l, "a/b"); err == nil {
		t.Fatal("forget a/b: no error")
	}
}

// A node whose status does not change writes its record again every
// SeenInterval, and only its record: a lost node's LastSeen is at most
// that old.
func TestRecordSeen(t *testing.T) {
	c := startServer(t).Client()
	ctx := ctxT(t)
	l := etcd.Layout{}
	p, err := etcd.StartPublisher(ctx, etcd.PublisherConfig{Client: c, Layout: l, Node: "n1", SeenInterval: 100 * time.Millisecond}, etcd.NodeStatus{Revision: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(ctx)
	first, err := c.Get(ctx, l.Record("n1"))
	if err != nil || len(first.Kvs) != 1 {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); p.Records() < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d records in 10s with SeenInterval 100ms", p.Records())
		}
	}
	status, err := c.Get(ctx, l.Status("n1"))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.Get(ctx, l.Record("n1"))
	if err != nil {
		t.Fatal(err)
	}
	if status.Kvs[0].ModRevision != first.Kvs[0].ModRevision || p.Writes() != 1 {
		t.Fatalf("the unchanged status was written again (%d writes)", p.Writes())
	}
	if rec.Kvs[0].ModRevision <= first.Kvs[0].ModRevision || string(rec.Kvs[0].Value) == string(first.Kvs[0].Value) {
		t.Fatalf("the record was not written again: %s", rec.Kvs[0].Value)
	}
}

// The record's default rewrite interval is the documented minute.
func TestDefaultSeenInterval(t *testing.T) {
	if etcd.DefaultSeenInterval != time.Minute {
		t.Fatalf("DefaultSeenInterval %v, documented 1m", etcd.DefaultSeenInterval)
	}
}

// A summary says lost nodes only when there are some.
func TestSummary(t *testing.T) {
	for _, tc := range []struct {
		n, m, lost int
		want       string
	}{
		{3, 3, 0, "applied on 3 of 3 nodes at revision 7"},
		{1, 3, 1, "applied on 1 of 3 nodes at revision 7 (1 lost)"},
		{0, 2, 2, "applied on 0 of 2 nodes at revision 7 (2 lost)"},
	} {
		if got := etcd.Summary(tc.n, tc.m, tc.lost, 7); got != tc.want {
			t.Errorf("Summary(%d, %d, %d) = %q, want %q", tc.n, tc.m, tc.lost, got, tc.want)
		}
	}
}

// Received is reaching the revision; applied is received with every object
// Done; failed is received with an object in Error or Rejected.
func TestNodeStatusReceivedApplied(t *testing.T) {
	for _, tc := range []struct {
		st                      etcd.NodeStatus
		received, applied, fail bool
	}{
		{etcd.NodeStatus{Revision: 4, Objects: map[string]int{"Done": 2}}, false, false, false},
		{etcd.NodeStatus{Revision: 5, Objects: map[string]int{"Done": 2}}, true, true, false},
		{etcd.NodeStatus{Revision: 6}, true, true, false},
		{etcd.NodeStatus{Revision: 5, Objects: map[string]int{"Done": 2, "Pending": 1}}, true, false, false},
		{etcd.NodeStatus{Revision: 5, Objects: map[string]int{"Done": 2, "Error": 1}}, true, false, true},
		{etcd.NodeStatus{Revision: 5, Objects: map[string]int{"Done": 2, etcd.Rejected: 1}}, true, false, true},
		{etcd.NodeStatus{Revision: 5, Objects: map[string]int{"Done": 2, "Unknown": 1}}, true, false, false},
		{etcd.NodeStatus{Revision: 5, Objects: map[string]int{"Done": 2, "Error": 0}}, true, true, false},
		{etcd.NodeStatus{Revision: 4, Objects: map[string]int{"Error": 1}}, false, false, false},
	} {
		if r, a, f := tc.st.Received(5), tc.st.Applied(5), tc.st.Failed(5); r != tc.received || a != tc.applied || f != tc.fail {
			t.Errorf("%+v at 5: received %v, applied %v, failed %v; want %v, %v, %v", tc.st, r, a, f, tc.received, tc.applied, tc.fail)
		}
	}
}
