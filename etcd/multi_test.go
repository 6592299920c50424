package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/steadystate/steadystate/etcd"
	"github.com/steadystate/steadystate/etcd/etcdtest"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reflector"
	"github.com/steadystate/steadystate/statedb"
)

// multiNode is one node's tables, filled by one reflector.Multi from one
// etcd Source of all of them: as an agent runs them.
type multiNode struct {
	db     *statedb.DB
	names  []string
	tables map[string]statedb.RWTable[*obj]
	multi  *reflector.Multi[[]byte]
}

// afterCommit is reflector metrics that call a function after each commit,
// on the reflector's goroutine (nothing else commits meanwhile).
type afterCommit struct {
	reflector.NopMetrics
	fn func()
}

func (a afterCommit) BatchCommitted(string, int, time.Duration) {
	if a.fn != nil {
		a.fn()
	}
}

func startMultiNode(t *testing.T, c *clientv3.Client, l etcd.Layout, node string, batch int, hook func(), tables ...string) *multiNode {
	t.Helper()
	n := &multiNode{db: statedb.New(), names: tables, tables: map[string]statedb.RWTable[*obj]{}}
	src, err := etcd.NewTablesSource(c, l, tables, node)
	if err != nil {
		t.Fatal(err)
	}
	var specs []reflector.TableSpec[[]byte]
	for _, name := range tables {
		tbl, err := statedb.NewTable(n.db, name, nameIndex)
		if err != nil {
			t.Fatal(err)
		}
		n.tables[name] = tbl
		specs = append(specs, reflector.Into[[]byte, *obj]{
			Table: name,
			Writer: reconciler.DesiredWriter[*obj]{
				Table:           tbl,
				Equal:           func(a, b *obj) bool { return a.Value == b.Value },
				SetObjectStatus: func(o *obj, s reconciler.Status) *obj { o.Status = s; return o },
			},
			Transform: func(key string, v []byte) (*obj, error) { return &obj{Name: key, Value: string(v)}, nil },
		})
	}
	n.multi, err = reflector.NewMulti(n.db, reflector.MultiConfig[[]byte]{
		Name: "desired", Source: src, Tables: specs,
		// Batches far smaller than an apply, and a timer that never
		// fires: what ends a revision here is the source's Progress.
		BatchSize: batch, BatchInterval: time.Hour,
		RetryBackoffMin: 10 * time.Millisecond, RetryBackoffMax: 100 * time.Millisecond,
		Metrics: afterCommit{fn: hook},
		Logger:  slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.multi.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return n
}

// contents returns every table as table → name → value, at one ReadTxn.
func (n *multiNode) contents() map[string]map[string]string {
	txn := n.db.ReadTxn()
	out := map[string]map[string]string{}
	for _, name := range n.names {
		out[name] = map[string]string{}
		for o := range n.tables[name].All(txn) {
			out[name][o.Name] = o.Value
		}
	}
	return out
}

// waitRevision waits until the node's revision is at or past rev and
// returns how long that took.
func (n *multiNode) waitRevision(t *testing.T, rev int64, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.After(within)
	for {
		got, moved := n.multi.RevisionWatch()
		if got >= uint64(rev) {
			return time.Since(start)
		}
		select {
		case <-moved:
		case <-deadline:
			t.Fatalf("the node is at revision %d after %v, want %d or later", got, within, rev)
		}
	}
}

func tablesOf(kv ...any) map[string]map[string][]byte {
	out := map[string]map[string][]byte{}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1].(map[string][]byte)
	}
	return out
}

// After an apply that changes one table of three in place, a node's one
// reflector reaches the apply's revision (DesiredRevision) at once, with
// no progress notification from etcd, on Debian's etcd-server 3.4.23 (which
// sends one only every 10 minutes, and requested ones out of order) as on
// 3.7.3, both real processes; and the node holds the new state of all three
// tables at that revision.
func TestOneTableChange(t *testing.T) {
	servers := map[string]func(t testing.TB) string{
		"etcd 3.7.3":         etcdtest.Binary,
		"Debian etcd-server": debianEtcd,
	}
	for name, bin := range servers {
		t.Run(name, func(t *testing.T) {
			cl := etcdtest.StartCluster(t, bin(t), 1)
			c := cl.Client()
			ctx := ctxT(t)
			l := etcd.Layout{}
			tables := []string{"ta", "tb", "tc"}
			n := startMultiNode(t, c, l, "n1", 1000, nil, tables...)
			if _, err := etcd.ApplyTables(ctx, c, l, etcd.ScopeAll, tablesOf(
				"ta", values("a", "1"), "tb", values("b", "1"), "tc", values("c", "1"))); err != nil {
				t.Fatal(err)
			}
			for i := range 5 {
				// One table changes, in place; the others do not.
				rev, err := etcd.ApplyTables(ctx, c, l, etcd.ScopeAll, tablesOf(
					"ta", values("a", itoa(i+2)), "tb", values("b", "1"), "tc", values("c", "1")))
				if err != nil {
					t.Fatal(err)
				}
				want, err := etcd.DesiredRevision(ctx, c, l, tables, "n1")
				if err != nil || want != rev {
					t.Fatalf("DesiredRevision %d, %v; want the apply's %d", want, err, rev)
				}
				took := n.waitRevision(t, want, 5*time.Second)
				got := n.contents()
				if exp := map[string]map[string]string{"ta": {"a": itoa(i + 2)}, "tb": {"b": "1"}, "tc": {"c": "1"}}; !maps.EqualFunc(got, exp, maps.Equal) {
					t.Fatalf("at revision %d the node holds %v, want %v", n.multi.Revision(), got, exp)
				}
				if took > time.Second {
					t.Fatalf("change %d: the node reached revision %d after %v, want within 1s", i, rev, took)
				}
				t.Logf("change %d at revision %d: reached after %v", i, rev, took)
				// A write elsewhere in the cluster moves etcd's revision,
				// not the node's desired state.
				if _, err := c.Put(ctx, "/elsewhere", itoa(i)); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// debianEtcd returns Debian's etcd-server, or skips (fails with
// STEADYSTATE_REQUIRE_ETCD=1) where it is not installed.
func debianEtcd(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil || !strings.HasPrefix(bin, "/usr/bin/") {
		if os.Getenv("STEADYSTATE_REQUIRE_ETCD") == "1" {
			t.Fatalf("Debian's etcd-server is not installed (/usr/bin/etcd): %v", err)
		}
		t.Skip("Debian's etcd-server is not installed (apt-get install etcd-server)")
	}
	return bin
}

// An in-place apply of many objects over two tables is one etcd revision
// of many events: the node commits it whole, in one transaction, however
// small its batches, and its revision claims the apply only then. After
// every commit the tables hold the state before the apply or after it,
// never a part.
func TestApplyInPlaceCommittedWhole(t *testing.T) {
	c := startEtcd(t)
	ctx := ctxT(t)
	l := etcd.Layout{}
	before := tablesOf("ta", map[string][]byte{}, "tb", map[string][]byte{})
	after := tablesOf("ta", map[string][]byte{}, "tb", map[string][]byte{})
	for i := range 105 {
		before["ta"][fmt.Sprintf("o%03d", i)] = []byte("old")
		after["ta"][fmt.Sprintf("o%03d", i)] = []byte("new")
	}
	for i := range 10 {
		before["tb"][fmt.Sprintf("p%02d", i)] = []byte("old")
		after["tb"][fmt.Sprintf("p%02d", i)] = []byte("new")
	}
	if _, err := etcd.ApplyTables(ctx, c, l, etcd.ScopeAll, before); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var bad []string
	var n *multiNode
	applied := int64(-1) // the apply's revision, once known
	check := func() {
		mu.Lock()
		defer mu.Unlock()
		if n == nil {
			return // the list, before startMultiNode returned
		}
		got := n.contents()
		whole := func(want map[string]map[string][]byte) bool {
			for table, objs := range want {
				if len(got[table]) != len(objs) {
					return false
				}
				for k, v := range objs {
					if got[table][k] != string(v) {
						return false
					}
				}
			}
			return true
		}
		isBefore, isAfter := whole(before), whole(after)
		rev := n.multi.Revision()
		switch {
		case !isBefore && !isAfter && len(got["ta"])+len(got["tb"]) > 0:
			bad = append(bad, fmt.Sprintf("a commit at revision %d holds part of the apply: %v", rev, got))
		case applied > 0 && rev >= uint64(applied) && !isAfter:
			bad = append(bad, fmt.Sprintf("revision %d claims the apply at %d, but the tables hold %v", rev, applied, got))
		}
	}
	node := startMultiNode(t, c, l, "n1", 10, check, "ta", "tb")
	mu.Lock()
	n = node
	mu.Unlock()
	n.waitRevision(t, 1, 15*time.Second)
	rev, err := etcd.ApplyTables(ctx, c, l, etcd.ScopeAll, after)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	applied = rev
	mu.Unlock()
	n.waitRevision(t, rev, 15*time.Second)
	check()
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Fatal(strings.Join(bad, "\n"))
	}
}

// The same with a reflector of one table: an in-place apply of 105 objects
// is one revision, and batches of 10 never split it.
func TestApplyInPlaceOneTableCommittedWhole(t *testing.T) {
	c := startEtcd(t)
	ctx := ctxT(t)
	l := etcd.Layout{}
	before, after := map[string][]byte{}, map[string][]byte{}
	for i := range 105 {
		before[fmt.Sprintf("o%03d", i)], after[fmt.Sprintf("o%03d", i)] = []byte("old"), []byte("new")
	}
	if _, err := etcd.Apply(ctx, c, l, "objs", etcd.ScopeAll, before); err != nil {
		t.Fatal(err)
	}
	db := statedb.New()
	table, err := statedb.NewTable(db, "objs", nameIndex)
	if err != nil {
		t.Fatal(err)
	}
	src, err := etcd.NewSource(c, l, "objs", "n1")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var bad []string
	applied := int64(-1)
	var r *reflector.Reflector[[]byte, *obj]
	check := func() {
		mu.Lock()
		defer mu.Unlock()
		if r == nil {
			return
		}
		rev := r.Revision()
		olds, news := 0, 0
		for o := range table.All(db.ReadTxn()) {
			if o.Value == "new" {
				news++
			} else {
				olds++
			}
		}
		if olds != 0 && news != 0 {
			bad = append(bad, fmt.Sprintf("a commit holds %d old and %d new objects", olds, news))
		}
		if applied > 0 && rev >= uint64(applied) && news != 105 {
			bad = append(bad, fmt.Sprintf("revision %d claims the apply at %d with %d of 105 objects new", rev, applied, news))
		}
	}
	refl, err := reflector.New(db, reflector.Config[[]byte, *obj]{
		Name: "objs", Source: src,
		Writer: reconciler.DesiredWriter[*obj]{Table: table, Equal: func(a, b *obj) bool { return a.Value == b.Value },
			SetObjectStatus: func(o *obj, s reconciler.Status) *obj { o.Status = s; return o }},
		Transform: func(key string, v []byte) (*obj, error) { return &obj{Name: key, Value: string(v)}, nil },
		BatchSize: 10, BatchInterval: time.Hour, Metrics: afterCommit{fn: check},
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	r = refl
	mu.Unlock()
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	for r.Revision() == 0 {
		time.Sleep(time.Millisecond)
	}
	rev, err := etcd.Apply(ctx, c, l, "objs", etcd.ScopeAll, after)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	applied = rev
	mu.Unlock()
	deadline := time.Now().Add(15 * time.Second)
	for r.Revision() < uint64(rev) {
		if time.Now().After(deadline) {
			t.Fatalf("revision %d after 15s, want %d", r.Revision(), rev)
		}
		time.Sleep(time.Millisecond)
	}
	check()
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Fatal(strings.Join(bad, "\n"))
	}
}

// A Source refuses to read a layout version it does not know: the
// reflector keeps what it has and reports the error.
func TestSourceRefusesAnUnknownLayout(t *testing.T) {
	c := startEtcd(t)
	ctx := ctxT(t)
	l := etcd.Layout{}
	if _, err := etcd.Apply(ctx, c, l, "ta", etcd.ScopeAll, values("a", "1")); err != nil {
		t.Fatal(err)
	}
	src, err := etcd.NewTablesSource(c, l, []string{"ta", "tb"}, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if items, _, err := src.List(ctx); err != nil || len(items) != 1 {
		t.Fatalf("List: %v, %v", items, err)
	}
	if _, err := c.Put(ctx, l.VersionKey(), "99"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := src.List(ctx); !errors.Is(err, etcd.ErrUnknownLayout) || !strings.Contains(err.Error(), `"99"`) {
		t.Fatalf("List of layout 99: %v, want ErrUnknownLayout naming it", err)
	}
}
