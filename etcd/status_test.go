package etcd_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/steadystate/steadystate/etcd"
)

// waitView waits until cond holds for the fleet view.
func waitView(t *testing.T, c *clientv3.Client, l etcd.Layout, what string, cond func(etcd.View) bool) etcd.View {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		v, err := etcd.Fleet(t.Context(), c, l)
		if err != nil {
			t.Fatal(err)
		}
		if cond(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; view %+v", what, v)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Three nodes publish their statuses; the fleet view says how many applied
// a revision; a node that stops is gone at once, one that dies (its lease
// not kept alive) is lost within the lease's TTL; a second agent with a
// live node's name is refused.
func TestFleetStatus(t *testing.T) {
	c := startEtcd(t)
	ctx := ctxT(t)
	l := etcd.Layout{}
	rev, err := etcd.Apply(ctx, c, l, "objs", etcd.ScopeAll, values("a", "1"))
	if err != nil {
		t.Fatal(err)
	}
	var pubs []*etcd.Publisher
	for i := range 3 {
		p, err := etcd.StartPublisher(ctx, etcd.PublisherConfig{Client: c, Layout: l, Node: fmt.Sprintf("n%d", i), TTL: 2 * time.Second, MinInterval: 50 * time.Millisecond},
			etcd.NodeStatus{Objects: map[string]int{"Pending": 1}})
		if err != nil {
			t.Fatal(err)
		}
		pubs = append(pubs, p)
	}
	defer func() {
		for _, p := range pubs[1:] {
			p.Stop(ctx)
		}
	}()
	v := waitView(t, c, l, "3 nodes", func(v etcd.View) bool { return len(v.Nodes) == 3 })
	if got := v.Summary(rev); got != fmt.Sprintf("applied on 0 of 3 nodes at revision %d", rev) {
		t.Fatalf("summary %q", got)
	}
	pubs[0].Publish(etcd.NodeStatus{Revision: rev, Objects: map[string]int{"Done": 1}})
	pubs[1].Publish(etcd.NodeStatus{Revision: rev, Objects: map[string]int{"Done": 1}})
	pubs[2].Publish(etcd.NodeStatus{Revision: rev, Objects: map[string]int{"Error": 1}, Errors: []string{"a: boom"}})
	// The three publish on their own: wait for n2's error too, not only
	// for the two that applied.
	v = waitView(t, c, l, "2 applied, n2 failed", func(v etcd.View) bool {
		n, _ := v.Applied(rev)
		return n == 2 && len(v.Nodes) == 3 && v.Nodes[2].Node == "n2" && len(v.Nodes[2].Errors) > 0
	})
	if got := v.Summary(rev); got != fmt.Sprintf("applied on 2 of 3 nodes at revision %d", rev) {
		t.Fatalf("summary %q", got)
	}
	if v.Nodes[2].Node != "n2" || v.Nodes[2].Errors[0] != "a: boom" {
		t.Fatalf("node n2: %+v", v.Nodes[2])
	}

	_, err = etcd.StartPublisher(ctx, etcd.PublisherConfig{Client: c, Layout: l, Node: "n1"}, etcd.NodeStatus{})
	if !errors.Is(err, etcd.ErrNodeTaken) {
		t.Fatalf("a second n1: %v", err)
	}

	// n0 stops cleanly: gone at once, not lost.
	if err := pubs[0].Stop(ctx); err != nil {
		t.Fatal(err)
	}
	v = waitView(t, c, l, "n0 gone", func(v etcd.View) bool { return len(v.Nodes) == 2 })
	if len(v.Lost) != 0 {
		t.Fatalf("n0 stopped cleanly, yet lost: %+v", v.Lost)
	}

	// A node dies: its lease is no longer kept alive (a crashed
	// agent's). It is lost within the TTL (and the lease's granularity).
	second, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	p, err := etcd.StartPublisher(ctx, etcd.PublisherConfig{Client: second, Layout: l, Node: "dying", TTL: 2 * time.Second}, etcd.NodeStatus{})
	if err != nil {
		t.Fatal(err)
	}
	waitView(t, c, l, "dying listed", func(v etcd.View) bool { return len(v.Nodes) == 3 })
	second.Close() // the keep-alives stop with the connection
	start := time.Now()
	v = waitView(t, c, l, "dying lost", func(v etcd.View) bool { return len(v.Nodes) == 2 })
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("a dead node stayed %v with a 2s TTL", took)
	}
	if len(v.Lost) != 1 || v.Lost[0].Node != "dying" {
		t.Fatalf("lost nodes %+v, want dying", v.Lost)
	}
	p.Stop(ctx) // its client is closed: only ends the goroutine
}

// Status changes coalesce: a burst of 1000 Publish calls writes a few
// times, the last status wins, and an unchanged status is not written.
func TestPublisherCoalesces(t *testing.T) {
	c := startEtcd(t)
	ctx := ctxT(t)
	l := etcd.Layout{}
	p, err := etcd.StartPublisher(ctx, etcd.PublisherConfig{Client: c, Layout: l, Node: "n1", MinInterval: 200 * time.Millisecond, Burst: 1}, etcd.NodeStatus{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(ctx)
	start := time.Now()
	for i := range 1000 {
		p.Publish(etcd.NodeStatus{Revision: int64(i)})
	}
	waitView(t, c, l, "the last status", func(v etcd.View) bool { return len(v.Nodes) == 1 && v.Nodes[0].Revision == 999 })
	// The claim, then one write per MinInterval (200ms) while the burst
	// and the wait lasted, and the last one.
	if w, most := p.Writes(), 2+int(time.Since(start)/(200*time.Millisecond)); w > most {
		t.Fatalf("%d writes for a burst of 1000 in %v (want at most %d)", w, time.Since(start), most)
	}
	before := p.Writes()
	for range 100 {
		p.Publish(etcd.NodeStatus{Revision: 999})
	}
	p.Publish(etcd.NodeStatus{Revision: 1000})
	waitView(t, c, l, "the next status", func(v etcd.View) bool { return v.Nodes[0].Revision == 1000 })
	// The write is counted after etcd answered it, which may be after
	// the view saw it: wait for the count, then check it is exactly one.
	for deadline := time.Now().Add(5 * time.Second); p.Writes() == before && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if p.Writes() != before+1 {
		t.Fatalf("100 unchanged statuses and a changed one took %d writes, want 1", p.Writes()-before)
	}
}

// A lost lease (expired in a partition, revoked) does not lose the node:
// the publisher claims its key again under a new lease, with the latest
// status.
func TestPublisherReclaims(t *testing.T) {
	c := startEtcd(t)
	ctx := ctxT(t)
	l := etcd.Layout{}
	p, err := etcd.StartPublisher(ctx, etcd.PublisherConfig{Client: c, Layout: l, Node: "n1", MinInterval: 10 * time.Millisecond}, etcd.NodeStatus{Revision: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(ctx)
	p.Publish(etcd.NodeStatus{Revision: 7})
	waitView(t, c, l, "revision 7", func(v etcd.View) bool { return len(v.Nodes) == 1 && v.Nodes[0].Revision == 7 })
	resp, err := c.Get(ctx, l.Status("n1"))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("reading the status: %v", err)
	}
	lease := clientv3.LeaseID(resp.Kvs[0].Lease)
	if _, err := c.Revoke(ctx, lease); err != nil {
		t.Fatal(err)
	}
	v := waitView(t, c, l, "n1 back under a new lease", func(v etcd.View) bool { return len(v.Nodes) == 1 })
	if v.Nodes[0].Revision != 7 {
		t.Fatalf("status after the reclaim: %+v, want the latest (revision 7)", v.Nodes[0])
	}
	resp, err = c.Get(ctx, l.Status("n1"))
	if err != nil || len(resp.Kvs) != 1 || clientv3.LeaseID(resp.Kvs[0].Lease) == lease {
		t.Fatalf("the status is not under a new lease: %v", err)
	}
}

// Per-object status keys: off by default; on, they follow PublishObjects
// (changed ones written, gone ones deleted, unchanged ones left alone,
// more than one transaction's worth at once), and go with the lease.
func TestPublisherObjectStatuses(t *testing.T) {
	c := startEtcd(t)
	ctx := ctxT(t)
	l := etcd.Layout{}
	off, err := etcd.StartPublisher(ctx, etcd.PublisherConfig{Client: c, Layout: l, Node: "off", MinInterval: time.Millisecond}, etcd.NodeStatus{})
	if err != nil {
		t.Fatal(err)
	}
	off.PublishObjects("routes", map[string]etcd.ObjectStatus{"a": {Kind: "Done"}})
	off.Publish(etcd.NodeStatus{Revision: 7})
	waitView(t, c, l, "off's status", func(v etcd.View) bool { return len(v.Nodes) == 1 && v.Nodes[0].Revision == 7 })
	if got, err := etcd.ObjectStatuses(ctx, c, l, "off"); err != nil || len(got) != 0 {
		t.Fatalf("object statuses without ObjectStatuses: %v, %v", got, err)
	}
	off.Stop(ctx)

	p, err := etcd.StartPublisher(ctx, etcd.PublisherConfig{Client: c, Layout: l, Node: "n1", MinInterval: time.Millisecond, ObjectStatuses: true}, etcd.NodeStatus{})
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]etcd.ObjectStatus{"b": {Kind: "Error", Error: "boom"}}
	for i := range 300 {
		objs[fmt.Sprintf("o%03d", i)] = etcd.ObjectStatus{Kind: "Done"}
	}
	p.PublishObjects("routes", objs)
	p.PublishObjects("rules", map[string]etcd.ObjectStatus{"x": {Kind: "Pending"}})
	wait := func(what string, cond func(map[string]map[string]etcd.ObjectStatus) bool) map[string]map[string]etcd.ObjectStatus {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, err := etcd.ObjectStatuses(ctx, c, l, "n1")
			if err == nil && cond(got) {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v, %v", what, got, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	got := wait("301 routes and a rule", func(m map[string]map[string]etcd.ObjectStatus) bool {
		return len(m["routes"]) == 301 && len(m["rules"]) == 1
	})
	if got["routes"]["b"] != (etcd.ObjectStatus{Kind: "Error", Error: "boom"}) || got["rules"]["x"].Kind != "Pending" {
		t.Fatalf("statuses %v, %v", got["routes"]["b"], got["rules"]["x"])
	}
	before, err := c.Get(ctx, l.ObjectStatus("n1", "routes", "o000"))
	if err != nil {
		t.Fatal(err)
	}
	// b repaired, o299 gone, the rest unchanged.
	objs["b"] = etcd.ObjectStatus{Kind: "Done"}
	delete(objs, "o299")
	p.PublishObjects("routes", objs)
	wait("b Done, o299 gone", func(m map[string]map[string]etcd.ObjectStatus) bool {
		_, gone := m["routes"]["o299"]
		return m["routes"]["b"].Kind == "Done" && !gone && len(m["routes"]) == 300
	})
	after, err := c.Get(ctx, l.ObjectStatus("n1", "routes", "o000"))
	if err != nil {
		t.Fatal(err)
	}
	if after.Kvs[0].ModRevision != before.Kvs[0].ModRevision {
		t.Fatalf("an unchanged object status was written again (mod revision %d → %d)", before.Kvs[0].ModRevision, after.Kvs[0].ModRevision)
	}
	// Stopping revokes the lease: every key of the node goes.
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := etcd.ObjectStatuses(ctx, c, l, "n1"); err != nil || len(got) != 0 {
		t.Fatalf("object statuses after Stop: %v, %v", got, err)
	}
}

// The wait between reclaims: 100ms doubling to 10s, never above.
func TestReclaimWait(t *testing.T) {
	for attempts, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 8: 10 * time.Second, 50: 10 * time.Second} {
		if got := etcd.ReclaimWait(attempts); got < want || got > want+want/4 || got > 10*time.Second {
			t.Errorf("attempt %d: %v, want %v plus up to a quarter", attempts, got, want)
		}
	}
}
