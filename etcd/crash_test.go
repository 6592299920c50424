package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/steadystate/steadystate/etcd"
	"github.com/steadystate/steadystate/etcd/etcdtest"
)

// How crashKV makes an apply's last transaction (the one that puts it in
// force: it writes a current key) go wrong.
const (
	// crashBefore: the apply's context ends just before it is sent (a
	// deadline, Ctrl-C): it fails, and the apply cleans up.
	crashBefore = "context ends before the flip"
	// crashKilled: the process dies instead of sending it: nothing more
	// is sent, not even the cleanup.
	crashKilled = "killed before the flip"
	// crashLost: it is sent and etcd commits it, but the answer is lost
	// (the context's deadline passes meanwhile): the client sees an error
	// and cannot know the outcome.
	crashLost = "flip committed, answer lost"
)

// crashKV is a KV whose first transaction that writes a current key goes
// wrong as mode says.
type crashKV struct {
	clientv3.KV
	mode   string
	cancel context.CancelFunc // the apply's context's
	hit    atomic.Bool
	dead   atomic.Bool // killed: every call fails
}

var errKilled = errors.New("the process was killed")

func (k *crashKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	if k.dead.Load() {
		return nil, errKilled
	}
	return k.KV.Put(ctx, key, val, opts...)
}

func (k *crashKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	if k.dead.Load() {
		return nil, errKilled
	}
	return k.KV.Get(ctx, key, opts...)
}

func (k *crashKV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	if k.dead.Load() {
		return nil, errKilled
	}
	return k.KV.Delete(ctx, key, opts...)
}

func (k *crashKV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	if k.dead.Load() {
		return clientv3.OpResponse{}, errKilled
	}
	return k.KV.Do(ctx, op)
}

func (k *crashKV) Txn(ctx context.Context) clientv3.Txn {
	// A lost answer: the transaction itself must reach etcd although the
	// context ends while it is under way.
	return &crashTxn{k: k, inner: k.KV.Txn(context.WithoutCancel(ctx)), ctx: ctx}
}

type crashTxn struct {
	k     *crashKV
	inner clientv3.Txn
	ctx   context.Context
	flip  bool
}

func (t *crashTxn) If(cs ...clientv3.Cmp) clientv3.Txn { t.inner = t.inner.If(cs...); return t }
func (t *crashTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.inner = t.inner.Else(ops...)
	return t
}
func (t *crashTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	for _, op := range ops {
		if op.IsPut() && strings.HasSuffix(string(op.KeyBytes()), "/current") {
			t.flip = true
		}
	}
	t.inner = t.inner.Then(ops...)
	return t
}

func (t *crashTxn) Commit() (*clientv3.TxnResponse, error) {
	if t.k.dead.Load() {
		return nil, errKilled
	}
	if !t.flip || !t.k.hit.CompareAndSwap(false, true) {
		if err := t.ctx.Err(); err != nil {
			return nil, err
		}
		return t.inner.Commit()
	}
	switch t.k.mode {
	case crashBefore:
		t.k.cancel()
		return nil, t.ctx.Err()
	case crashKilled:
		t.k.dead.Store(true)
		return nil, errKilled
	}
	if _, err := t.inner.Commit(); err != nil {
		return nil, err
	}
	t.k.cancel()
	return nil, fmt.Errorf("answer lost: %w", context.DeadlineExceeded)
}

// generations returns the generations under table's scope that hold keys,
// and the one in force ("" if none).
func generations(t *testing.T, c *clientv3.Client, l etcd.Layout, table, scope string) (gens []string, current string) {
	t.Helper()
	ctx := ctxT(t)
	resp, err := c.Get(ctx, l.Scope(table, scope)+"gen/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		gen, _, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), l.Scope(table, scope)+"gen/"), "/")
		if !slices.Contains(gens, gen) {
			gens = append(gens, gen)
		}
	}
	cur, err := c.Get(ctx, l.Current(table, scope))
	if err != nil {
		t.Fatal(err)
	}
	if len(cur.Kvs) > 0 {
		current = string(cur.Kvs[0].Value)
	}
	return gens, current
}

// An apply that goes wrong at its last step, on the in-place and on the
// staged path, while a node reflects the scope: the apply fails; etcd
// holds the old state whole (the doc: "a failed apply leaves the old
// state in force and removes what it staged"); what it staged is cleaned
// up, or, when the process died before it could, by the next apply; the
// node holds, after every commit, a state etcd held, and at the end the
// state in force.
func TestApplyCrashMidStep(t *testing.T) {
	cl := startServer(t)
	c := cl.Client()
	old := tablesOf("ta", objects(3, "old"), "tb", objects(3, "old"))
	changes := map[string]map[string]map[string][]byte{
		// One object of each table: in place, one transaction.
		"in place": tablesOf("ta", objects(3, "old"), "tb", objects(3, "old")),
		// 200 objects of ta: staged, then put in force.
		"staged": tablesOf("ta", objects(200, "new"), "tb", objects(3, "old")),
	}
	changes["in place"]["ta"]["o000"] = []byte("new")
	changes["in place"]["tb"]["o001"] = []byte("new")
	for _, path := range []string{"in place", "staged"} {
		for _, mode := range []string{crashBefore, crashKilled, crashLost} {
			t.Run(path+"/"+mode, func(t *testing.T) {
				crashOnce(t, cl, c, path, mode, old, changes[path])
			})
		}
	}
}

func crashOnce(t *testing.T, cl *etcdtest.Cluster, c *clientv3.Client, path, mode string, old, next map[string]map[string][]byte) {
	ctx := ctxT(t)
	l := etcd.Layout{Prefix: "/crash/" + strings.ReplaceAll(t.Name(), " ", "-")}
	if _, err := etcd.ApplyTables(ctx, c, l, etcd.ScopeAll, old); err != nil {
		t.Fatal(err)
	}
	states := []map[string]map[string]string{asStrings(old), asStrings(next)}
	var mu sync.Mutex
	var seen []map[string]map[string]string
	var n *multiNode
	node := startMultiNode(t, c, l, "n1", 1000, func() {
		mu.Lock()
		defer mu.Unlock()
		if n != nil {
			seen = append(seen, n.contents())
		}
	}, "ta", "tb")
	mu.Lock()
	n = node
	mu.Unlock()
	first, err := etcd.DesiredRevision(ctx, c, l, []string{"ta", "tb"}, "n1")
	if err != nil {
		t.Fatal(err)
	}
	n.waitRevision(t, first, 10*time.Second)

	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	crashing := cl.Client()
	kv := &crashKV{KV: crashing.KV, mode: mode, cancel: cancel}
	crashing.KV = kv
	_, applyErr := etcd.ApplyTables(actx, crashing, l, etcd.ScopeAll, next)
	if !kv.hit.Load() {
		t.Fatalf("the apply never reached its last step (%v)", applyErr)
	}
	got := tablesState(t, c, l, etcd.ScopeAll, "ta", "tb")
	states = append(states, got) // what the node may hold now
	if mode == crashLost {
		// The last step committed and only its answer was lost: the
		// apply finds out and says that its state is in force.
		if applyErr != nil || !sameState(got, asStrings(next)) {
			t.Fatalf("the last step committed, its answer lost: ApplyTables said %v, etcd holds ta %v, tb %v; want success and the new state",
				applyErr, sample(got["ta"]), got["tb"])
		}
	} else if applyErr == nil {
		t.Fatal("the apply succeeded though its last step went wrong")
	}
	switch {
	case mode == crashLost:
	case sameState(got, asStrings(old)):
	case sameState(got, asStrings(next)):
		t.Errorf("ApplyTables failed (%v), yet its state is in force: the caller is told the old state stays (agent fleet apply: \"nothing of it is in force\")", applyErr)
	default:
		t.Errorf("ApplyTables failed (%v) and etcd holds neither the old state nor the new: ta has %d objects %v, tb %v",
			applyErr, len(got["ta"]), sample(got["ta"]), got["tb"])
	}

	// What it staged: gone, or gone after the next apply.
	leftovers := func() []string {
		var out []string
		for _, table := range []string{"ta", "tb"} {
			gens, cur := generations(t, c, l, table, etcd.ScopeAll)
			for _, g := range gens {
				if g != cur {
					out = append(out, table+" "+g)
				}
			}
		}
		return out
	}
	if left := leftovers(); len(left) > 0 && mode != crashKilled {
		t.Errorf("generations not in force left behind by the failed apply: %v", left)
	}
	rev, err := etcd.ApplyTables(ctx, c, l, etcd.ScopeAll, next)
	if err != nil {
		t.Fatal(err)
	}
	if left := leftovers(); len(left) > 0 {
		t.Errorf("generations not in force left behind after the next apply succeeded (the first was %s): %v; nothing names or removes them", mode, left)
	}
	if got := tablesState(t, c, l, etcd.ScopeAll, "ta", "tb"); !sameState(got, asStrings(next)) {
		t.Fatalf("after the next apply: ta %v, tb %v", sample(got["ta"]), got["tb"])
	}
	desired, err := etcd.DesiredRevision(ctx, c, l, []string{"ta", "tb"}, "n1")
	if err != nil || desired < rev {
		t.Fatalf("DesiredRevision %d, %v; want at least the apply's %d", desired, err, rev)
	}
	n.waitRevision(t, desired, 10*time.Second)
	if got := n.contents(); !sameState(got, asStrings(next)) {
		t.Fatalf("the node at revision %d (desired %d) holds ta %v, tb %v", n.multi.Revision(), desired, sample(got["ta"]), got["tb"])
	}
	// Every commit of the node held a state etcd held: the old, the new,
	// or (when the failed apply left one) what was in force after it.
	mu.Lock()
	defer mu.Unlock()
	for i, s := range seen {
		if !slices.ContainsFunc(states, func(st map[string]map[string]string) bool { return sameState(s, st) }) {
			t.Errorf("commit %d of the node held a mix: ta %v, tb %v", i, sample(s["ta"]), s["tb"])
		}
	}
}

// sample is a short form of a table for a message: its size and its
// first few objects.
func sample(objs map[string]string) string {
	keys := slices.Sorted(maps.Keys(objs))
	var b strings.Builder
	fmt.Fprintf(&b, "(%d)", len(keys))
	for _, k := range keys[:min(len(keys), 3)] {
		fmt.Fprintf(&b, " %s=%s", k, objs[k])
	}
	return b.String()
}
