package etcd_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/steadystate/steadystate/etcd"
	"github.com/steadystate/steadystate/etcd/etcdtest"
)

// nodeStateAt reads what node's tables must hold at etcd revision rev: for
// each table, the fleet-wide objects of the generation in force, with the
// node's own winning on a shared name.
func nodeStateAt(t *testing.T, c *clientv3.Client, l etcd.Layout, node string, rev int64, tables ...string) map[string]map[string]string {
	t.Helper()
	ctx := ctxT(t)
	out := map[string]map[string]string{}
	for _, table := range tables {
		out[table] = map[string]string{}
		for _, scope := range []string{etcd.ScopeAll, etcd.NodeScope(node)} {
			cur, err := c.Get(ctx, l.Current(table, scope), clientv3.WithRev(rev))
			if err != nil {
				t.Fatal(err)
			}
			if len(cur.Kvs) == 0 {
				continue
			}
			prefix := l.Generation(table, scope, string(cur.Kvs[0].Value))
			objs, err := c.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev))
			if err != nil {
				t.Fatal(err)
			}
			for _, kv := range objs.Kvs {
				out[table][string(kv.Key[len(prefix):])] = string(kv.Value)
			}
		}
	}
	return out
}

// memberClient returns a client of member i alone, quick to notice that
// it stopped answering, closed when the test ends.
func memberClient(t *testing.T, cl *etcdtest.Cluster, i int) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints: []string{cl.Members[i].ClientURL}, DialTimeout: 2 * time.Second, Logger: zap.NewNop(),
		DialKeepAliveTime: time.Second, DialKeepAliveTimeout: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A node's Revision never claims a desired revision whose objects are not
// all in its tables, and once it reaches DesiredRevision its tables hold
// exactly the desired state, through the cases where that is hard: a
// change of another node's scope (nothing changes for this node), a
// fleet-wide object overridden by the node's own, changed fleet-wide
// meanwhile, then the own one removed (the fleet-wide one shows again,
// through a Resync), a generation flip of one table while another changes
// in place (two applies at once), changes, a delete and a compaction while
// the node's only etcd member is paused (its watch stalled), and again
// while it is killed (its watch lost; the relist deletes what went). After
// every commit of the node and whenever a reader looks, it holds a state
// etcd held at or after the revision it claims.
func TestNodeRevisionTruth(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-member etcd cluster")
	}
	cl := etcdtest.StartCluster(t, etcdtest.Binary(t), 3)
	c := cl.Client()
	ctx := ctxT(t)
	l := etcd.Layout{Prefix: "/truth"}
	tables := []string{"ta", "tb", "tc"}
	h := &history{}
	h.add(0, map[string]map[string]string{"ta": {}, "tb": {}, "tc": {}})
	record := func(rev int64) {
		t.Helper()
		h.add(rev, nodeStateAt(t, c, l, "n1", rev, tables...))
	}
	apply := func(scope string, kv ...any) int64 {
		t.Helper()
		rev, err := etcd.ApplyTables(ctx, c, l, scope, tablesOf(kv...))
		if err != nil {
			t.Fatal(err)
		}
		record(rev)
		return rev
	}
	apply(etcd.ScopeAll, "ta", values("a", "1", "x", "1"), "tb", values("b", "1"), "tc", values("c", "1"))

	var mu sync.Mutex
	var snaps []nodeSnap
	var n *multiNode
	node := startMultiNode(t, memberClient(t, cl, 0), l, "n1", 10, func() {
		mu.Lock()
		defer mu.Unlock()
		if n != nil {
			snaps = append(snaps, nodeSnap{claimed: n.multi.Revision(), tables: n.contents()})
		}
	}, tables...)
	mu.Lock()
	n = node
	mu.Unlock()
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			claimed, moved := n.multi.RevisionWatch()
			s := nodeSnap{claimed: claimed, tables: n.contents()}
			mu.Lock()
			snaps = append(snaps, s)
			mu.Unlock()
			select {
			case <-moved:
			case <-stop:
				return
			}
		}
	})
	// reached waits until the node reached its desired revision and checks
	// that it holds the desired state then.
	reached := func(step string) int64 {
		t.Helper()
		// Right after a member resumes, a read may meet a leader change:
		// read again, for a while.
		var desired int64
		var err error
		for deadline := time.Now().Add(15 * time.Second); ; {
			if desired, err = etcd.DesiredRevision(ctx, c, l, tables, "n1"); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v", step, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		n.waitRevision(t, desired, 15*time.Second)
		got, want := n.contents(), nodeStateAt(t, c, l, "n1", desired, tables...)
		if !maps.EqualFunc(got, want, maps.Equal) {
			t.Fatalf("%s: the node reached its desired revision %d (at %d) holding %s\nwant %s", step, desired, n.multi.Revision(), samples(got), samples(want))
		}
		return desired
	}
	reached("the first list")

	before := reached("before n2's change")
	apply(etcd.NodeScope("n2"), "ta", values("a", "n2"), "tc", values("z", "n2"))
	if d := reached("a change of n2's scope"); d != before {
		t.Fatalf("n1's desired revision moved from %d to %d with a change of n2's scope", before, d)
	}

	apply(etcd.NodeScope("n1"), "ta", values("a", "own"))
	reached("a's own object")
	apply(etcd.ScopeAll, "ta", values("a", "2", "x", "1"), "tb", values("b", "1"), "tc", values("c", "1"))
	reached("a changed fleet-wide under the own one")
	apply(etcd.NodeScope("n1"), "ta", values())
	reached("the own a removed")
	if got := n.contents()["ta"]["a"]; got != "2" {
		t.Fatalf("the own a removed: the node holds a=%q, want the fleet-wide 2", got)
	}

	// A generation flip of ta (200 objects: staged) and an in-place
	// change of tb, at once (they name different tables: no conflict).
	big := objects(200, "big")
	var wg sync.WaitGroup
	revs := make([]int64, 2)
	errs := make([]error, 2)
	wg.Go(func() { revs[0], errs[0] = etcd.ApplyTables(ctx, c, l, etcd.ScopeAll, tablesOf("ta", big)) })
	wg.Go(func() {
		revs[1], errs[1] = etcd.ApplyTables(ctx, c, l, etcd.ScopeAll, tablesOf("tb", values("b", "2")))
	})
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("the flip of ta and the change of tb: %v, %v", errs[0], errs[1])
	}
	record(revs[0])
	record(revs[1])
	reached("a flip of ta with an in-place change of tb")

	// The node's member paused: changes (one a delete), and a compaction
	// past them, while its watch is down.
	others := clientv3.Config{Endpoints: cl.Endpoints()[1:], DialTimeout: 2 * time.Second, Logger: zap.NewNop()}
	oc, err := clientv3.New(others)
	if err != nil {
		t.Fatal(err)
	}
	defer oc.Close()
	cl.Pause(0)
	paused := n.multi.Revision()
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	// The two others elect a leader (member 0 may have been it).
	for {
		pctx, pcancel := context.WithTimeout(wctx, time.Second)
		_, err := oc.Put(pctx, "/truth-elsewhere", "x")
		pcancel()
		if err == nil {
			break
		}
		if wctx.Err() != nil {
			cl.Resume(0)
			t.Fatalf("the two other members: %v", err)
		}
	}
	big2 := objects(200, "big")
	big2["o100"] = []byte("big2")
	var last int64
	for i, change := range []struct {
		scope string
		kv    []any
	}{
		// In place, all of them: the watch must go on from a compacted
		// revision to see them, or list again.
		{etcd.ScopeAll, []any{"ta", big, "tb", values("b", "3"), "tc", values()}}, // tc's c deleted
		{etcd.NodeScope("n1"), []any{"ta", values("o007", "own")}},
		{etcd.ScopeAll, []any{"ta", big2}},
	} {
		rev, err := etcd.ApplyTables(wctx, oc, l, change.scope, tablesOf(change.kv...))
		if err != nil {
			cl.Resume(0)
			t.Fatalf("change %d with the node's member paused: %v", i, err)
		}
		h.add(rev, nodeStateAt(t, oc, l, "n1", rev, tables...))
		last = rev
	}
	if _, err := oc.Compact(wctx, last); err != nil {
		cl.Resume(0)
		t.Fatal(err)
	}
	if got := n.multi.Revision(); got != paused {
		cl.Resume(0)
		t.Fatalf("the node's revision moved from %d to %d while its member was paused", paused, got)
	}
	time.Sleep(2500 * time.Millisecond) // past the client's keep-alive: the watch is down
	cl.Resume(0)
	reached(fmt.Sprintf("changes and a compaction (at %d) while the node's member was paused", last))

	// The node's member killed: a delete of a fleet-wide object, an own
	// object's change, and a compaction while it is down; restarted, the
	// node lists again and deletes what went.
	cl.Kill(0)
	killed := n.multi.Revision()
	for {
		pctx, pcancel := context.WithTimeout(wctx, time.Second)
		_, err := oc.Put(pctx, "/truth-elsewhere", "y")
		pcancel()
		if err == nil {
			break
		}
		if wctx.Err() != nil {
			t.Fatalf("the two other members: %v", err)
		}
	}
	small := objects(200, "big")
	delete(small, "o000")
	small["o100"] = []byte("big2")
	for i, change := range []struct {
		scope string
		kv    []any
	}{
		{etcd.ScopeAll, []any{"ta", small}},
		{etcd.NodeScope("n1"), []any{"ta", values("o007", "own2")}},
	} {
		rev, err := etcd.ApplyTables(wctx, oc, l, change.scope, tablesOf(change.kv...))
		if err != nil {
			t.Fatalf("change %d with the node's member killed: %v", i, err)
		}
		h.add(rev, nodeStateAt(t, oc, l, "n1", rev, tables...))
		last = rev
	}
	if _, err := oc.Compact(wctx, last); err != nil {
		t.Fatal(err)
	}
	if got := n.multi.Revision(); got != killed {
		t.Fatalf("the node's revision moved from %d to %d while its member was down", killed, got)
	}
	cl.Restart(0)
	reached(fmt.Sprintf("a delete and a compaction (at %d) while the node's member was down", last))
	if _, ok := n.contents()["ta"]["o000"]; ok {
		t.Fatal("ta o000, deleted while the node's member was down, is still in its table")
	}

	close(stop)
	readers.Wait()
	mu.Lock()
	defer mu.Unlock()
	bad := 0
	for _, s := range snaps {
		if err := h.check(s); err != nil {
			if bad++; bad <= 5 {
				t.Errorf("the node %v", err)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d looks at the node were wrong", bad, len(snaps))
	}
	t.Logf("%d looks at the node, all right", len(snaps))
}
