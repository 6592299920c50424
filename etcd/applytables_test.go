package etcd_test

import (
	"fmt"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/steadystate/steadystate/etcd"
)

// ApplyTables puts every changed table's new state in force in one
// transaction, in place or by staged generations: the tables' current keys
// change at one revision, the one returned; unchanged tables are not
// touched; an unchanged apply writes nothing and returns the last change.
func TestApplyTables(t *testing.T) {
	c := startEtcd(t)
	ctx := ctxT(t)
	l := etcd.Layout{}
	mods := func(tables ...string) []int64 {
		t.Helper()
		var out []int64
		for _, table := range tables {
			resp, err := c.Get(ctx, l.Current(table, etcd.ScopeAll))
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Kvs) == 0 {
				out = append(out, 0)
				continue
			}
			out = append(out, resp.Kvs[0].ModRevision)
		}
		return out
	}
	objs := func(n int, v string) map[string][]byte {
		m := map[string][]byte{}
		for i := range n {
			m[fmt.Sprintf("o%03d", i)] = []byte(v)
		}
		return m
	}
	for _, step := range []struct {
		name    string
		tables  map[string]map[string][]byte
		changed []string
	}{
		{"first: staged", map[string]map[string][]byte{"a": objs(200, "1"), "b": objs(1, "1"), "c": {}}, []string{"a", "b"}},
		{"small change of two: in place", map[string]map[string][]byte{"a": objs(200, "1"), "b": objs(2, "1"), "c": objs(1, "1")}, []string{"b", "c"}},
		{"large change of one", map[string]map[string][]byte{"a": objs(200, "2"), "b": objs(2, "1"), "c": objs(1, "1")}, []string{"a"}},
		{"unchanged", map[string]map[string][]byte{"a": objs(200, "2"), "b": objs(2, "1"), "c": objs(1, "1")}, nil},
	} {
		before := mods("a", "b", "c")
		rev, err := etcd.ApplyTables(ctx, c, l, etcd.ScopeAll, step.tables)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		after := mods("a", "b", "c")
		for i, table := range []string{"a", "b", "c"} {
			changed := false
			for _, ch := range step.changed {
				changed = changed || ch == table
			}
			switch {
			case changed && after[i] != rev:
				t.Errorf("%s: table %s put in force at %d, not at the apply's revision %d", step.name, table, after[i], rev)
			case !changed && after[i] != before[i]:
				t.Errorf("%s: unchanged table %s rewritten (%d → %d)", step.name, table, before[i], after[i])
			}
		}
		if step.changed == nil && rev != max(before[0], before[1], before[2]) {
			t.Errorf("%s: returned %d, want the last change %d", step.name, rev, max(before[0], before[1], before[2]))
		}
		// The tables hold exactly the objects applied.
		for table, want := range step.tables {
			resp, err := c.Get(ctx, l.Current(table, etcd.ScopeAll))
			if err != nil || (len(resp.Kvs) == 0 && len(want) > 0) {
				t.Fatalf("%s: %s has no generation: %v", step.name, table, err)
			}
			if len(resp.Kvs) == 0 {
				continue
			}
			got, err := c.Get(ctx, l.Generation(table, etcd.ScopeAll, string(resp.Kvs[0].Value)), clientv3.WithPrefix())
			if err != nil || len(got.Kvs) != len(want) {
				t.Fatalf("%s: %s holds %d objects, want %d (%v)", step.name, table, len(got.Kvs), len(want), err)
			}
		}
	}
	if _, err := etcd.ApplyTables(ctx, c, l, "node/a/b", map[string]map[string][]byte{"a": {}}); err == nil {
		t.Fatal("a scope node/a/b was accepted")
	}
}

// What a writer that died before its flip or its rollout's start left
// behind (deltas, generations numbered above the one in force) is
// removed by the next apply that changes the table, in place or staged,
// in its one transaction; the state applied is in force and whole.
func TestApplyRemovesStale(t *testing.T) {
	c := startEtcd(t)
	ctx := ctxT(t)
	l := etcd.Layout{}
	node := etcd.NodeScope("n1")
	if _, err := etcd.ApplyTables(ctx, c, l, etcd.ScopeAll, map[string]map[string][]byte{"ta": values("a", "1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := etcd.ApplyTables(ctx, c, l, node, map[string]map[string][]byte{"ta": values("a", "1")}); err != nil {
		t.Fatal(err)
	}
	stale := []string{
		l.Delta("ta", "d000000000007") + "put/a", l.Generation("ta", etcd.ScopeAll, "g000000000009") + "a",
		l.Generation("ta", node, "g000000000009") + "a",
		l.Delta("tb", "d000000000003") + "del/b", l.Generation("tb", etcd.ScopeAll, "g000000000099") + "b",
	}
	for _, k := range stale {
		if _, err := c.Put(ctx, k, "stale"); err != nil {
			t.Fatal(err)
		}
	}
	// ta in place, tb (nothing in force) staged; then ta of node n1.
	rev, err := etcd.ApplyTables(ctx, c, l, etcd.ScopeAll, map[string]map[string][]byte{"ta": values("a", "2"), "tb": values("b", "2")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := etcd.ApplyTables(ctx, c, l, node, map[string]map[string][]byte{"ta": values("a", "2")}); err != nil {
		t.Fatal(err)
	}
	for _, k := range stale {
		if resp, err := c.Get(ctx, k); err != nil || len(resp.Kvs) != 0 {
			t.Errorf("%s left behind (%v)", k, err)
		}
	}
	for table, want := range map[string]string{"ta": "2", "tb": "2"} {
		cur, err := c.Get(ctx, l.Current(table, etcd.ScopeAll))
		if err != nil || len(cur.Kvs) != 1 || cur.Kvs[0].ModRevision != rev {
			t.Fatalf("%s's current key: %v, %v", table, cur.Kvs, err)
		}
		gen := l.Generation(table, etcd.ScopeAll, string(cur.Kvs[0].Value))
		objs, err := c.Get(ctx, gen, clientv3.WithPrefix())
		if err != nil || len(objs.Kvs) != 1 || string(objs.Kvs[0].Value) != want {
			t.Fatalf("%s in force: %v, %v", gen, objs.Kvs, err)
		}
	}
}
