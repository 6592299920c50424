package etcd_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steadystate/steadystate/etcd"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reflector"
	"github.com/steadystate/steadystate/statedb"
)

// A node whose watch catches up on many applies at once (it starts from a
// revision etcd has moved well past: here its first list was slow; a
// watch resumed after a disconnect is the same) gets them in one watch
// response of many revisions, each of many events. With the reflector's
// default BatchInterval and a BatchSize smaller than the backlog, a batch
// is flushed at each revision boundary; when that commit takes longer than
// BatchInterval (a slow Transform here, a large batch on a loaded machine
// alike), the rest of the next revision is waiting in the Source's send.
// The node must still commit every revision whole and end holding the
// desired state at the revision it claims.
func TestCatchUpWithSlowCommits(t *testing.T) {
	c := startServer(t).Client()
	ctx := ctxT(t)
	l := etcd.Layout{Prefix: "/catchup"}
	// Apply i adds 120 objects to those of the applies before: in place,
	// one revision of 120 events, none of them ever written again (an
	// event lost is an object missing for good).
	want := map[string][]byte{"gate": []byte("gate")}
	add := func(i int) map[string][]byte {
		for k := range 120 {
			want[fmt.Sprintf("a%02d-%03d", i, k)] = []byte(fmt.Sprintf("v%d", i))
		}
		want[fmt.Sprintf("a%02d-000", i)] = []byte(fmt.Sprintf("slow%d", i)) // its Transform is slow: a slow commit
		return maps.Clone(want)
	}
	base := add(0)
	if _, err := etcd.Apply(ctx, c, l, "ta", etcd.ScopeAll, base); err != nil {
		t.Fatal(err)
	}

	db := statedb.New()
	table, err := statedb.NewTable(db, "ta", nameIndex)
	if err != nil {
		t.Fatal(err)
	}
	listing := make(chan struct{})
	gate := make(chan struct{})
	var once sync.Once
	src, err := etcd.NewSource(c, l, "ta", "n1")
	if err != nil {
		t.Fatal(err)
	}
	m, err := reflector.NewMulti(db, reflector.MultiConfig[[]byte]{
		Name: "desired", Source: src,
		Tables: []reflector.TableSpec[[]byte]{reflector.Into[[]byte, *obj]{
			Table: "ta",
			Writer: reconciler.DesiredWriter[*obj]{Table: table, Equal: func(a, b *obj) bool { return a.Value == b.Value },
				SetObjectStatus: func(o *obj, s reconciler.Status) *obj { o.Status = s; return o }},
			Transform: func(key string, v []byte) (*obj, error) {
				switch {
				case string(v) == "gate":
					// The first list waits here until the applies are in.
					once.Do(func() { close(listing) })
					<-gate
				case strings.HasPrefix(string(v), "slow"):
					time.Sleep(reflector.DefaultBatchInterval + 30*time.Millisecond)
				}
				return &obj{Name: key, Value: string(v)}, nil
			},
		}},
		// The default BatchInterval (the agent's); batches smaller than the
		// backlog.
		BatchSize: 100,
		Logger:    slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(runCtx) }()
	defer func() { cancel(); <-done }()

	select {
	case <-listing:
	case <-time.After(10 * time.Second):
		t.Fatal("the node did not list")
	}
	var last int64
	for i := 1; i <= 12; i++ {
		if last, err = etcd.Apply(ctx, c, l, "ta", etcd.ScopeAll, add(i)); err != nil {
			close(gate)
			t.Fatal(err)
		}
	}
	close(gate)

	deadline := time.Now().Add(15 * time.Second)
	for m.Revision() < uint64(last) {
		if time.Now().After(deadline) {
			t.Fatalf("the node is at revision %d after 15s, want %d", m.Revision(), last)
		}
		time.Sleep(5 * time.Millisecond)
	}
	got := map[string]string{}
	for o := range table.All(db.ReadTxn()) {
		got[o.Name] = o.Value
	}
	if !maps.Equal(got, asStrings(map[string]map[string][]byte{"ta": want})["ta"]) {
		var wrong []string
		for _, k := range slices.Sorted(maps.Keys(want)) {
			if got[k] != string(want[k]) {
				wrong = append(wrong, fmt.Sprintf("%s=%q (want %q)", k, got[k], want[k]))
			}
		}
		t.Fatalf("the node claims revision %d (the last apply's %d) but %d of its %d objects are not as etcd holds them: %s",
			m.Revision(), last, len(wrong), len(want), strings.Join(wrong[:min(len(wrong), 8)], ", "))
	}
}
