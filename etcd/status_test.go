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
// not kept alive) within the lease's TTL; a second agent with a live
// node's name is refused.
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
	v = waitView(t, c, l, "2 applied", func(v etcd.View) bool { n, _ := v.Applied(rev); return n == 2 })
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

	// n0 stops cleanly: gone at once.
	if err := pubs[0].Stop(ctx); err != nil {
		t.Fatal(err)
	}
	waitView(t, c, l, "n0 gone", func(v etcd.View) bool { return len(v.Nodes) == 2 })

	// n1 dies: its lease is no longer kept alive (a crashed agent's).
	// It is gone within the TTL (and the lease's granularity).
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
	waitView(t, c, l, "dying gone", func(v etcd.View) bool { return len(v.Nodes) == 2 })
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("a dead node stayed %v with a 2s TTL", took)
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
