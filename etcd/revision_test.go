package etcd_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/steadystate/steadystate/etcd"
)

// DesiredRevision is the revision of the last Apply that changed a node's
// desired state, whichever table and scope it changed, in place or by a
// new generation; an unchanged Apply and changes meant for others leave it.
func TestDesiredRevision(t *testing.T) {
	c := startEtcd(t)
	ctx := ctxT(t)
	l := etcd.Layout{Prefix: "/rev"}
	tables := []string{"ta", "tb"}
	desired := func(node string) int64 {
		t.Helper()
		rev, err := etcd.DesiredRevision(ctx, c, l, tables, node)
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	if got := desired("n1"); got != 0 {
		t.Fatalf("nothing applied: DesiredRevision %d, want 0", got)
	}

	large := map[string][]byte{}
	for i := range 200 { // more than one transaction: a new generation
		large[fmt.Sprintf("o%03d", i)] = []byte("v")
	}
	steps := []struct {
		name         string
		table, scope string
		objects      map[string][]byte
		changes      bool // whether n1's desired state changes
	}{
		{"table a, every node", "ta", etcd.ScopeAll, values("x", "1", "y", "2"), true},
		{"table b, n1 alone", "tb", etcd.NodeScope("n1"), values("z", "3"), true},
		{"table a unchanged", "ta", etcd.ScopeAll, values("x", "1", "y", "2"), false},
		{"table a, in place", "ta", etcd.ScopeAll, values("x", "10", "y", "2"), true},
		{"table b, another node", "tb", etcd.NodeScope("n2"), values("z", "4"), false},
		{"another table", "tc", etcd.ScopeAll, values("w", "5"), false},
		{"table b, n1 alone, a new generation", "tb", etcd.NodeScope("n1"), large, true},
		{"table a, every object removed", "ta", etcd.ScopeAll, nil, true},
		{"table b, n1 alone, every object removed", "tb", etcd.NodeScope("n1"), nil, true},
	}
	want := int64(0)
	for _, st := range steps {
		rev, err := etcd.Apply(ctx, c, l, st.table, st.scope, st.objects)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if st.changes {
			want = rev
		}
		if got := desired("n1"); got != want {
			t.Fatalf("%s: Apply at %d, DesiredRevision %d, want %d", st.name, rev, got, want)
		}
	}
	// n2 saw the fleet-wide changes of table a and its own of table b.
	if got, err := etcd.DesiredRevision(ctx, c, l, []string{"tb"}, "n2"); err != nil || got == 0 || got >= want {
		t.Fatalf("n2's table b: DesiredRevision %d, %v; want its apply, before %d", got, err, want)
	}
}

// The reads of DesiredRevision fit in one transaction, or it says why not.
func TestDesiredRevisionErrors(t *testing.T) {
	c := startEtcd(t)
	ctx := ctxT(t)
	many := func(n int) []string {
		var ts []string
		for i := range n {
			ts = append(ts, fmt.Sprintf("t%02d", i))
		}
		return ts
	}
	if rev, err := etcd.DesiredRevision(ctx, c, etcd.Layout{}, append(many(42), "t00"), "n1"); err != nil || rev != 0 {
		t.Fatalf("42 tables (and a duplicate): %d, %v; want 0 and no error", rev, err)
	}
	for _, tc := range []struct {
		name   string
		tables []string
		node   string
		want   string
	}{
		{"43 tables", many(43), "n1", "43 tables take 129 reads"},
		{"bad table", []string{"a/b"}, "n1", `table "a/b"`},
		{"bad node", []string{"a"}, "", `node ""`},
	} {
		if _, err := etcd.DesiredRevision(ctx, c, etcd.Layout{}, tc.tables, tc.node); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.want)
		}
	}
}

// DesiredRevisions equals DesiredRevision node by node, for a fleet larger
// than one transaction holds.
func TestDesiredRevisions(t *testing.T) {
	c := startEtcd(t)
	ctx := ctxT(t)
	l := etcd.Layout{}
	tables := []string{"ta", "tb", "tc"}
	if _, err := etcd.Apply(ctx, c, l, "ta", etcd.ScopeAll, values("a", "1")); err != nil {
		t.Fatal(err)
	}
	var nodes []string
	for i := range 60 {
		node := fmt.Sprintf("n%02d", i)
		nodes = append(nodes, node)
		if i%7 == 0 {
			if _, err := etcd.Apply(ctx, c, l, tables[i%3], etcd.NodeScope(node), values("x", node)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A node's pin (a rollout reached it) is a change of its desired
	// state; another node's is not.
	pinned, err := c.Put(ctx, l.Pin("tb", "n05"), "g000000000001")
	if err != nil {
		t.Fatal(err)
	}
	if rev, err := etcd.DesiredRevision(ctx, c, l, tables, "n05"); err != nil || rev != pinned.Header.Revision {
		t.Fatalf("n05, pinned at %d: desired revision %d, %v", pinned.Header.Revision, rev, err)
	}
	if rev, err := etcd.DesiredRevision(ctx, c, l, tables, "n06"); err != nil || rev >= pinned.Header.Revision {
		t.Fatalf("n06, not pinned: desired revision %d, %v", rev, err)
	}
	got, err := etcd.DesiredRevisions(ctx, c, l, tables, nodes)
	if err != nil {
		t.Fatal(err)
	}
	for _, node := range nodes {
		want, err := etcd.DesiredRevision(ctx, c, l, tables, node)
		if err != nil || got[node] != want {
			t.Fatalf("node %s: %d, want %d (%v)", node, got[node], want, err)
		}
	}
}
