package etcd_test

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/steadystate/steadystate/etcd"
	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
	"github.com/steadystate/steadystate/reflector"
	"github.com/steadystate/steadystate/statedb"
)

// obj is a desired object as the reflector stores it: a name and the value
// from etcd.
type obj struct {
	Name   string
	Value  string
	Status reconciler.Status
}

var nameIndex = statedb.Index[*obj, string]{
	Name:       "name",
	FromObject: func(o *obj) index.KeySet { return index.NewKeySet(index.String(o.Name)) },
	FromKey:    index.String,
	Unique:     true,
}

// node is one agent's table, filled by a reflector from etcd.
type node struct {
	db     *statedb.DB
	table  statedb.RWTable[*obj]
	health *reconcilertest.Health
}

func startNode(t *testing.T, c *clientv3.Client, l etcd.Layout, name string) *node {
	t.Helper()
	n := &node{db: statedb.New(), health: &reconcilertest.Health{}}
	var err error
	if n.table, err = statedb.NewTable(n.db, "objs", nameIndex); err != nil {
		t.Fatal(err)
	}
	src, err := etcd.NewSource(c, l, "objs", name)
	if err != nil {
		t.Fatal(err)
	}
	src.RequestTimeout = time.Second
	r, err := reflector.New(n.db, reflector.Config[[]byte, *obj]{
		Name:   "objs",
		Source: src,
		Writer: reconciler.DesiredWriter[*obj]{
			Table:           n.table,
			Equal:           func(a, b *obj) bool { return a.Value == b.Value },
			SetObjectStatus: func(o *obj, s reconciler.Status) *obj { o.Status = s; return o },
		},
		Transform: func(key string, v []byte) (*obj, error) {
			if strings.HasPrefix(string(v), "bad") {
				return nil, errors.New("bad value")
			}
			return &obj{Name: key, Value: string(v)}, nil
		},
		BatchInterval:   time.Millisecond,
		RetryBackoffMin: 10 * time.Millisecond,
		RetryBackoffMax: 100 * time.Millisecond,
		Health:          n.health,
		Logger:          slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return n
}

// waitFor waits until the node's table holds exactly want.
func (n *node) waitFor(t *testing.T, want map[string]string) {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		objs, watch := n.table.AllWatch(n.db.ReadTxn())
		got := map[string]string{}
		for o := range objs {
			got[o.Name] = o.Value
		}
		if maps.Equal(got, want) {
			return
		}
		select {
		case <-watch:
		case <-deadline:
			t.Fatalf("table %v, want %v", got, want)
		}
	}
}

func values(kv ...string) map[string][]byte {
	m := map[string][]byte{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = []byte(kv[i+1])
	}
	return m
}

// Desired state applied to etcd reaches the nodes' tables: fleet-wide
// objects everywhere, a node's own objects only there and winning over a
// fleet-wide one of the same name; a new generation replaces the old one
// whole; an object removed from a node's scope shows the fleet-wide one
// again.
func TestApplyReachesNodes(t *testing.T) {
	c := startEtcd(t)
	ctx := ctxT(t)
	l := etcd.Layout{Prefix: "/test"}
	if _, err := etcd.Apply(ctx, c, l, "objs", etcd.ScopeAll, values("a", "1", "b", "2", "c", "3")); err != nil {
		t.Fatal(err)
	}
	n1, n2 := startNode(t, c, l, "n1"), startNode(t, c, l, "n2")
	n1.waitFor(t, map[string]string{"a": "1", "b": "2", "c": "3"})
	n2.waitFor(t, map[string]string{"a": "1", "b": "2", "c": "3"})

	if _, err := etcd.Apply(ctx, c, l, "objs", etcd.NodeScope("n1"), values("b", "own", "z", "26")); err != nil {
		t.Fatal(err)
	}
	n1.waitFor(t, map[string]string{"a": "1", "b": "own", "c": "3", "z": "26"})

	if _, err := etcd.Apply(ctx, c, l, "objs", etcd.ScopeAll, values("a", "10", "b", "20")); err != nil {
		t.Fatal(err)
	}
	n1.waitFor(t, map[string]string{"a": "10", "b": "own", "z": "26"})
	n2.waitFor(t, map[string]string{"a": "10", "b": "20"})

	if _, err := etcd.Apply(ctx, c, l, "objs", etcd.NodeScope("n1"), nil); err != nil {
		t.Fatal(err)
	}
	n1.waitFor(t, map[string]string{"a": "10", "b": "20"})

	// An object written straight into the generation in force is an
	// event like any other; a bad one keeps the last good version.
	resp, err := c.Get(ctx, l.Current("objs", etcd.ScopeAll))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("reading the generation in force: %v", err)
	}
	gen := string(resp.Kvs[0].Value)
	c.Put(ctx, l.Generation("objs", etcd.ScopeAll, gen)+"d", "4")
	c.Put(ctx, l.Generation("objs", etcd.ScopeAll, gen)+"a", "bad!")
	c.Delete(ctx, l.Generation("objs", etcd.ScopeAll, gen)+"b")
	n2.waitFor(t, map[string]string{"a": "10", "d": "4"})

	// Only the generation in force is left.
	left, err := c.Get(ctx, l.Scope("objs", etcd.ScopeAll)+"gen/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range left.Kvs {
		if !strings.HasPrefix(string(kv.Key), l.Generation("objs", etcd.ScopeAll, gen)) {
			t.Errorf("key %s of an old generation left behind", kv.Key)
		}
	}
}

// A state larger than one etcd transaction allows is applied whole.
func TestApplyLarge(t *testing.T) {
	c := startEtcd(t)
	ctx := ctxT(t)
	l := etcd.Layout{}
	want := map[string]string{}
	objs := map[string][]byte{}
	for i := range 1000 {
		k := "o" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + itoa(i)
		want[k], objs[k] = itoa(i), []byte(itoa(i))
	}
	if _, err := etcd.Apply(ctx, c, l, "objs", etcd.ScopeAll, objs); err != nil {
		t.Fatal(err)
	}
	startNode(t, c, l, "n1").waitFor(t, want)
	if _, err := etcd.Apply(ctx, c, l, "objs", "all", values("bad/name", "1")); err == nil {
		t.Fatal("a name with a slash was accepted")
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// A watch from a compacted revision says Resync, and the relist that
// follows deletes what went meanwhile: no delete is lost.
func TestCompactionResync(t *testing.T) {
	c := startEtcd(t)
	ctx := ctxT(t)
	l := etcd.Layout{}
	if _, err := etcd.Apply(ctx, c, l, "objs", etcd.ScopeAll, values("a", "1", "b", "2")); err != nil {
		t.Fatal(err)
	}
	src, err := etcd.NewSource(c, l, "objs", "n1")
	if err != nil {
		t.Fatal(err)
	}
	items, rev, err := src.List(ctx)
	if err != nil || len(items) != 2 {
		t.Fatalf("List: %v, %v", items, err)
	}
	resp, err := c.Get(ctx, l.Current("objs", etcd.ScopeAll))
	if err != nil {
		t.Fatal(err)
	}
	gen := string(resp.Kvs[0].Value)
	if _, err := c.Delete(ctx, l.Generation("objs", etcd.ScopeAll, gen)+"b"); err != nil {
		t.Fatal(err)
	}
	other, err := c.Put(ctx, "/elsewhere", "x")
	if err != nil {
		t.Fatal(err)
	}
	// The delete's revision is compacted away.
	if _, err := c.Compact(ctx, other.Header.Revision); err != nil {
		t.Fatal(err)
	}
	events, err := src.Watch(ctx, rev)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-events:
		if ev.Kind != reflector.Resync {
			t.Fatalf("first event %+v, want Resync", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event from a compacted revision")
	}
	for range events {
	}
	items, _, err = src.List(ctx)
	if err != nil || len(items) != 1 || items[0].Key != "a" {
		t.Fatalf("relist: %v, %v", items, err)
	}
}

// Two Applies of one scope at once: one wins, the other fails with
// ErrConflict or goes after it, and the state is one of them whole.
func TestApplyConflict(t *testing.T) {
	c := startEtcd(t)
	ctx := ctxT(t)
	l := etcd.Layout{}
	errs := make(chan error, 2)
	for _, v := range []string{"x", "y"} {
		go func() {
			_, err := etcd.Apply(ctx, c, l, "objs", etcd.ScopeAll, values("a", v, "b", v))
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil && !errors.Is(err, etcd.ErrConflict) {
			t.Fatal(err)
		}
	}
	src, _ := etcd.NewSource(c, l, "objs", "n1")
	items, _, err := src.List(ctx)
	if err != nil || len(items) != 2 || string(items[0].Value) != string(items[1].Value) {
		t.Fatalf("state %v, %v: want a and b from the same Apply", items, err)
	}
}

// A small change is applied in place, in one transaction, within the
// generation in force: the nodes get just the changed objects. A no-op
// Apply writes nothing.
func TestApplyInPlace(t *testing.T) {
	c := startEtcd(t)
	ctx := ctxT(t)
	l := etcd.Layout{}
	if _, err := etcd.Apply(ctx, c, l, "objs", etcd.ScopeAll, values("a", "1", "b", "2", "c", "3")); err != nil {
		t.Fatal(err)
	}
	gen := func() string {
		resp, err := c.Get(ctx, l.Current("objs", etcd.ScopeAll))
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("reading the generation: %v", err)
		}
		return string(resp.Kvs[0].Value)
	}
	before := gen()
	n := startNode(t, c, l, "n1")
	n.waitFor(t, map[string]string{"a": "1", "b": "2", "c": "3"})

	rev, err := etcd.Apply(ctx, c, l, "objs", etcd.ScopeAll, values("a", "1", "b", "20", "d", "4"))
	if err != nil {
		t.Fatal(err)
	}
	n.waitFor(t, map[string]string{"a": "1", "b": "20", "d": "4"})
	if gen() != before {
		t.Fatalf("a change of 3 objects made a new generation %s (was %s)", gen(), before)
	}
	again, err := etcd.Apply(ctx, c, l, "objs", etcd.ScopeAll, values("a", "1", "b", "20", "d", "4"))
	if err != nil || again != rev {
		t.Fatalf("a no-op Apply: revision %d (want %d, nothing written), %v", again, rev, err)
	}
}

// The documented default of Source.RequestTimeout.
func TestDefaultRequestTimeout(t *testing.T) {
	if etcd.DefaultRequestTimeout != 5*time.Second {
		t.Fatalf("DefaultRequestTimeout %v, documented 5s", etcd.DefaultRequestTimeout)
	}
}
