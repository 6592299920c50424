package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/steadystate/steadystate/etcd"
	"github.com/steadystate/steadystate/etcd/etcdtest"
)

// startServer runs a one-member cluster of etcd v3.7 processes (etcdtest)
// until the test ends and returns it.
func startServer(t *testing.T) *etcdtest.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts an etcd process")
	}
	return etcdtest.StartCluster(t, etcdtest.Binary(t), 1)
}

// interleaveKV runs between once, right after the first transaction its
// client commits: in ApplyTables, the read of the generations in force.
// So a second writer's apply lands exactly between the first one's read
// and its commit, without a sleep.
type interleaveKV struct {
	clientv3.KV
	once    sync.Once
	between func()
}

func (k *interleaveKV) Txn(ctx context.Context) clientv3.Txn {
	return &interleaveTxn{Txn: k.KV.Txn(ctx), k: k}
}

type interleaveTxn struct {
	clientv3.Txn
	k *interleaveKV
}

func (t *interleaveTxn) If(cs ...clientv3.Cmp) clientv3.Txn { t.Txn = t.Txn.If(cs...); return t }
func (t *interleaveTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.Txn = t.Txn.Then(ops...)
	return t
}
func (t *interleaveTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.Txn = t.Txn.Else(ops...)
	return t
}
func (t *interleaveTxn) Commit() (*clientv3.TxnResponse, error) {
	resp, err := t.Txn.Commit()
	t.k.once.Do(t.k.between)
	return resp, err
}

// interleaved returns a client of cl whose first transaction is followed
// by between.
func interleaved(cl *etcdtest.Cluster, between func()) *clientv3.Client {
	c := cl.Client()
	c.KV = &interleaveKV{KV: c.KV, between: between}
	return c
}

// tablesState reads every named table's objects in force in scope (a
// table with no generation in force reads empty), at one revision.
func tablesState(t *testing.T, c *clientv3.Client, l etcd.Layout, scope string, tables ...string) map[string]map[string]string {
	t.Helper()
	ctx := ctxT(t)
	resp, err := c.Get(ctx, l.Root(), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for _, kv := range resp.Kvs {
		keys[string(kv.Key)] = string(kv.Value)
	}
	out := map[string]map[string]string{}
	for _, table := range tables {
		out[table] = map[string]string{}
		gen, ok := keys[l.Current(table, scope)]
		if !ok {
			continue
		}
		prefix := l.Generation(table, scope, gen)
		for k, v := range keys {
			if name, ok := cutPrefix(k, prefix); ok {
				out[table][name] = v
			}
		}
	}
	return out
}

func cutPrefix(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):], true
	}
	return "", false
}

// asStrings is tables as tablesState reads them.
func asStrings(tables map[string]map[string][]byte) map[string]map[string]string {
	out := map[string]map[string]string{}
	for table, objs := range tables {
		out[table] = map[string]string{}
		for k, v := range objs {
			out[table][k] = string(v)
		}
	}
	return out
}

func sameState(a, b map[string]map[string]string) bool {
	return maps.EqualFunc(a, b, func(x, y map[string]string) bool { return maps.Equal(x, y) })
}

// objects returns n objects named o000... holding v.
func objects(n int, v string) map[string][]byte {
	m := map[string][]byte{}
	for i := range n {
		m[fmt.Sprintf("o%03d", i)] = []byte(v)
	}
	return m
}

// Two applies race: writer 1 reads, writer 2 applies (exactly then), writer
// 1 commits. Whenever writer 2 wrote a table writer 1 named, changed by
// writer 1 or not, in place or staged, with a generation in force or none
// yet, writer 1 fails with ErrConflict, writes nothing (no staged garbage
// either) and etcd holds writer 2's state; read again, writer 1's state
// goes in force whole. A write to another scope or to a table not named
// does not conflict; an unchanged apply returns the revision its state
// went into force.
func TestApplyTablesConflict(t *testing.T) {
	cl := startServer(t)
	c := cl.Client()
	for _, tc := range []struct {
		name     string
		base     map[string]map[string][]byte // applied first, fleet-wide
		w1, w2   map[string]map[string][]byte // writer 1's and writer 2's, fleet-wide
		w2Scope  string                       // writer 2's scope, if not fleet-wide
		conflict bool
	}{
		{
			name:     "in place: writer 1 changes b only, writer 2 a only",
			base:     map[string]map[string][]byte{"a": objects(1, "0"), "b": objects(1, "0")},
			w1:       map[string]map[string][]byte{"a": objects(1, "0"), "b": objects(1, "1")},
			w2:       map[string]map[string][]byte{"a": objects(1, "2"), "b": objects(1, "0")},
			conflict: true,
		},
		{
			name:     "staged: writer 1 changes 200 objects of b, writer 2 one of a",
			base:     map[string]map[string][]byte{"a": objects(1, "0"), "b": objects(200, "0")},
			w1:       map[string]map[string][]byte{"a": objects(1, "0"), "b": objects(200, "1")},
			w2:       map[string]map[string][]byte{"a": objects(1, "2")},
			conflict: true,
		},
		{
			name:     "staged: writer 1 puts a new table c in force, writer 2 changes a",
			base:     map[string]map[string][]byte{"a": objects(1, "0")},
			w1:       map[string]map[string][]byte{"a": objects(1, "0"), "c": objects(3, "1")},
			w2:       map[string]map[string][]byte{"a": objects(1, "2")},
			conflict: true,
		},
		{
			name:     "a table named but never applied: writer 2's first apply of it",
			base:     map[string]map[string][]byte{"b": objects(1, "0")},
			w1:       map[string]map[string][]byte{"a": {}, "b": objects(1, "1")},
			w2:       map[string]map[string][]byte{"a": objects(1, "2")},
			conflict: true,
		},
		{
			name:     "writer 2 changes a table writer 1 does not name",
			base:     map[string]map[string][]byte{"a": objects(1, "0"), "b": objects(1, "0")},
			w1:       map[string]map[string][]byte{"b": objects(1, "1")},
			w2:       map[string]map[string][]byte{"a": objects(1, "2")},
			conflict: false,
		},
		{
			name:     "writer 2 changes another scope",
			base:     map[string]map[string][]byte{"a": objects(1, "0"), "b": objects(1, "0")},
			w1:       map[string]map[string][]byte{"a": objects(1, "0"), "b": objects(1, "1")},
			w2:       map[string]map[string][]byte{"a": objects(1, "2")},
			w2Scope:  etcd.NodeScope("n1"),
			conflict: false,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			l := etcd.Layout{Prefix: "/conflict/" + t.Name()}
			if _, err := etcd.ApplyTables(ctx, c, l, etcd.ScopeAll, tc.base); err != nil {
				t.Fatal(err)
			}
			scope2 := etcd.ScopeAll
			if tc.w2Scope != "" {
				scope2 = tc.w2Scope
			}
			var rev2 int64
			var err2 error
			w1 := interleaved(cl, func() { rev2, err2 = etcd.ApplyTables(ctx, c, l, scope2, tc.w2) })
			rev1, err1 := etcd.ApplyTables(ctx, w1, l, etcd.ScopeAll, tc.w1)
			if err2 != nil {
				t.Fatalf("writer 2: %v", err2)
			}
			all := []string{"a", "b", "c"}
			got := tablesState(t, c, l, etcd.ScopeAll, all...)
			if !tc.conflict {
				if err1 != nil || rev1 <= rev2 {
					t.Fatalf("writer 1: %d, %v; want a success after writer 2's revision %d", rev1, err1, rev2)
				}
				return
			}
			if !errors.Is(err1, etcd.ErrConflict) {
				t.Fatalf("writer 1: %d, %v; want ErrConflict", rev1, err1)
			}
			// Writer 2's state, whole; nothing of writer 1's, not even a
			// staged generation.
			want := map[string]map[string]string{}
			for _, table := range all {
				want[table] = map[string]string{}
			}
			maps.Copy(want, asStrings(tc.base))
			maps.Copy(want, asStrings(tc.w2))
			if !sameState(got, want) {
				t.Fatalf("after the conflict etcd holds %v, want writer 2's %v", got, want)
			}
			for _, table := range all {
				gens, err := c.Get(ctx, l.Scope(table, etcd.ScopeAll)+"gen/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
				if err != nil {
					t.Fatal(err)
				}
				cur, err := c.Get(ctx, l.Current(table, etcd.ScopeAll))
				if err != nil {
					t.Fatal(err)
				}
				for _, kv := range gens.Kvs {
					if len(cur.Kvs) == 0 {
						t.Errorf("left behind by the failed apply: %s", kv.Key)
					} else if _, ok := cutPrefix(string(kv.Key), l.Generation(table, etcd.ScopeAll, string(cur.Kvs[0].Value))); !ok {
						t.Errorf("left behind by the failed apply: %s", kv.Key)
					}
				}
			}
			// Read again, writer 1's state goes in force whole.
			rev, err := etcd.ApplyTables(ctx, c, l, etcd.ScopeAll, tc.w1)
			if err != nil || rev <= rev2 {
				t.Fatalf("writer 1 again: %d, %v", rev, err)
			}
			got = tablesState(t, c, l, etcd.ScopeAll, all...)
			for table, objs := range asStrings(tc.w1) {
				if !maps.Equal(got[table], objs) {
					t.Fatalf("table %s after the retry: %v, want %v", table, got[table], objs)
				}
			}
		})
	}

	// Unchanged: writer 1 applies the state in force, writer 2 changes a
	// table in between. Writer 1 wrote nothing and says when its state went
	// into force (before writer 2's); writer 2's state stays.
	t.Run("unchanged", func(t *testing.T) {
		ctx := ctxT(t)
		l := etcd.Layout{Prefix: "/conflict/unchanged"}
		base := map[string]map[string][]byte{"a": objects(1, "0"), "b": objects(1, "0")}
		rev0, err := etcd.ApplyTables(ctx, c, l, etcd.ScopeAll, base)
		if err != nil {
			t.Fatal(err)
		}
		var rev2 int64
		var err2 error
		w2 := map[string]map[string][]byte{"a": objects(1, "2")}
		w1 := interleaved(cl, func() { rev2, err2 = etcd.ApplyTables(ctx, c, l, etcd.ScopeAll, w2) })
		rev1, err1 := etcd.ApplyTables(ctx, w1, l, etcd.ScopeAll, base)
		if err1 != nil || err2 != nil || rev1 != rev0 || rev2 <= rev0 {
			t.Fatalf("writer 1: %d, %v (want %d); writer 2: %d, %v", rev1, err1, rev0, rev2, err2)
		}
		if got := tablesState(t, c, l, etcd.ScopeAll, "a", "b"); got["a"]["o000"] != "2" || got["b"]["o000"] != "0" {
			t.Fatalf("state %v, want writer 2's", got)
		}
	})
}

// Two writers apply different states of two tables at once, round after
// round, each reading again and retrying on ErrConflict as `agent fleet
// apply` does; writer 1 changes only table a from the round's start,
// writer 2 only table b. etcd ends every round holding exactly one
// writer's state, the one whose apply returned the later revision, never a
// mix; in place (small tables) and staged (b of 200 objects).
func TestApplyTablesRace(t *testing.T) {
	cl := startServer(t)
	c1, c2, c := cl.Client(), cl.Client(), cl.Client()
	for _, size := range []int{1, 200} {
		t.Run(fmt.Sprintf("b of %d", size), func(t *testing.T) {
			ctx := ctxT(t)
			l := etcd.Layout{Prefix: fmt.Sprintf("/race/%d", size)}
			start := map[string]map[string][]byte{"a": objects(1, "0"), "b": objects(size, "0")}
			files := []map[string]map[string][]byte{
				{"a": objects(1, "1"), "b": objects(size, "0")},
				{"a": objects(1, "0"), "b": objects(size, "1")},
			}
			conflicts := 0
			for round := range 30 {
				if _, err := etcd.ApplyTables(ctx, c, l, etcd.ScopeAll, start); err != nil {
					t.Fatal(err)
				}
				var wg sync.WaitGroup
				revs := make([]int64, 2)
				errs := make([]error, 2)
				retried := make([]int, 2)
				for i, cl := range []*clientv3.Client{c1, c2} {
					wg.Go(func() {
						for attempt := range 4 {
							revs[i], errs[i] = etcd.ApplyTables(ctx, cl, l, etcd.ScopeAll, files[i])
							if !errors.Is(errs[i], etcd.ErrConflict) {
								return
							}
							retried[i] = attempt + 1
						}
					})
				}
				wg.Wait()
				if errs[0] != nil || errs[1] != nil {
					t.Fatalf("round %d: %v, %v", round, errs[0], errs[1])
				}
				conflicts += retried[0] + retried[1]
				last := 0
				if revs[1] > revs[0] {
					last = 1
				}
				if got := tablesState(t, c, l, etcd.ScopeAll, "a", "b"); !sameState(got, asStrings(files[last])) {
					t.Fatalf("round %d: etcd holds a=%v b[o000]=%v; want writer %d's state (revisions %v)",
						round, got["a"], got["b"]["o000"], last+1, revs)
				}
			}
			t.Logf("30 rounds, %d conflicts retried", conflicts)
		})
	}
}
