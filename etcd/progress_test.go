package etcd_test

import (
	"context"
	"errors"
	"log/slog"
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

// tableSet is one node's tables in one DB, each filled by a reflector from
// its own Source, all on one client: as an agent runs them.
type tableSet struct {
	db         *statedb.DB
	tables     map[string]statedb.RWTable[*obj]
	sources    map[string]*etcd.Source
	reflectors map[string]*reflector.Reflector[[]byte, *obj]
	lists      *listCounter
}

// listCounter counts each reflector's lists of its source.
type listCounter struct {
	reflector.NopMetrics
	mu    sync.Mutex
	lists map[string]int
}

func (m *listCounter) Relisted(r, _ string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lists[r]++
}

// startTables runs a reflector per table until the test ends; each source's
// RequestTimeout is probe.
func startTables(t *testing.T, c *clientv3.Client, l etcd.Layout, node string, probe time.Duration, tables ...string) *tableSet {
	t.Helper()
	a := &tableSet{db: statedb.New(), tables: map[string]statedb.RWTable[*obj]{},
		sources: map[string]*etcd.Source{}, reflectors: map[string]*reflector.Reflector[[]byte, *obj]{},
		lists: &listCounter{lists: map[string]int{}}}
	ctx, cancel := context.WithCancel(context.Background())
	var done []chan struct{}
	t.Cleanup(func() {
		cancel()
		for _, d := range done {
			<-d
		}
	})
	for _, name := range tables {
		table, err := statedb.NewTable(a.db, name, nameIndex)
		if err != nil {
			t.Fatal(err)
		}
		src, err := etcd.NewSource(c, l, name, node)
		if err != nil {
			t.Fatal(err)
		}
		src.RequestTimeout = probe
		r, err := reflector.New(a.db, reflector.Config[[]byte, *obj]{
			Name:   name,
			Source: src,
			Writer: reconciler.DesiredWriter[*obj]{
				Table:           table,
				Equal:           func(a, b *obj) bool { return a.Value == b.Value },
				SetObjectStatus: func(o *obj, s reconciler.Status) *obj { o.Status = s; return o },
			},
			Transform:     func(key string, v []byte) (*obj, error) { return &obj{Name: key, Value: string(v)}, nil },
			BatchInterval: time.Millisecond,
			Metrics:       a.lists,
			Logger:        slog.New(slog.NewTextHandler(t.Output(), nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		a.tables[name], a.sources[name], a.reflectors[name] = table, src, r
		d := make(chan struct{})
		done = append(done, d)
		go func() { defer close(d); r.Run(ctx) }()
	}
	for name, table := range a.tables {
		_, initialized := table.Initialized(a.db.ReadTxn())
		select {
		case <-initialized:
		case <-time.After(15 * time.Second):
			t.Fatalf("table %s not initialized after 15s", name)
		}
	}
	return a
}

// waitRevision waits until table's reflector reaches rev, meanwhile doing
// each (if set) every 500ms; it returns how long that took.
func (a *tableSet) waitRevision(t *testing.T, table string, rev int64, within time.Duration, each func()) time.Duration {
	t.Helper()
	start := time.Now()
	r := a.reflectors[table]
	next := start
	for r.Revision() < uint64(rev) {
		if time.Since(start) > within {
			t.Fatalf("the reflector of %s is at revision %d after %v, want %d or later", table, r.Revision(), within, rev)
		}
		if each != nil && !time.Now().Before(next) {
			each()
			next = time.Now().Add(500 * time.Millisecond)
		}
		time.Sleep(100 * time.Microsecond)
	}
	return time.Since(start)
}

// After an apply that changed table a only, table b's reflector reaches
// the apply's revision once b's source requests progress. The apply made
// a's first generation, so a's reflector relisted and watches from one
// beyond etcd's revision: had both watches shared a gRPC stream, etcd
// would not have answered until the next write.
func TestRequestProgress(t *testing.T) {
	c := startEtcd(t)
	ctx := ctxT(t)
	l := etcd.Layout{}
	// A request needs a running watch.
	idle, err := etcd.NewSource(c, l, "ta", "n1")
	if err != nil {
		t.Fatal(err)
	}
	if err := idle.RequestProgress(ctx); !errors.Is(err, etcd.ErrNotWatching) {
		t.Fatalf("RequestProgress before any watch: %v, want ErrNotWatching", err)
	}
	// One source per table: b's watch does not see a's apply.
	a := startTables(t, c, l, "n1", time.Hour, "ta", "tb")
	rev, err := etcd.Apply(ctx, c, l, "ta", etcd.ScopeAll, values("x", "1"))
	if err != nil {
		t.Fatal(err)
	}
	a.waitRevision(t, "ta", rev, 15*time.Second, nil)
	if got := a.reflectors["tb"].Revision(); got >= uint64(rev) {
		t.Fatalf("table b at revision %d before any progress, want below the apply's %d", got, rev)
	}

	requests := 0
	took := a.waitRevision(t, "tb", rev, 5*time.Second, func() {
		// etcd drops a request while the watch is catching up (not
		// expected here): ask again then.
		requests++
		for {
			err := a.sources["tb"].RequestProgress(ctx)
			if err == nil {
				return
			}
			if !errors.Is(err, etcd.ErrNotWatching) {
				t.Fatal(err)
			}
			time.Sleep(time.Millisecond) // the watch is about to start
		}
	})
	t.Logf("table b reached the apply's revision %d %v after the first of %d progress requests", rev, took, requests)
}

// Debian's etcd-server 3.4.23 sends a requested progress notification
// before the events of a watch that is catching up: the source refuses to
// ask it (a node does not need it: see TestOneTableChange).
func TestRequestProgressDebianEtcd(t *testing.T) {
	bin, err := exec.LookPath("etcd")
	if err != nil || !strings.HasPrefix(bin, "/usr/bin/") {
		if os.Getenv("STEADYSTATE_REQUIRE_ETCD") == "1" {
			t.Fatalf("Debian's etcd-server is not installed (/usr/bin/etcd): %v", err)
		}
		t.Skip("Debian's etcd-server is not installed (apt-get install etcd-server)")
	}
	cl := etcdtest.StartCluster(t, bin, 1)
	c := cl.Client()
	ctx := ctxT(t)
	l := etcd.Layout{}
	a := startTables(t, c, l, "n1", time.Hour, "ta", "tb")
	rev, err := etcd.Apply(ctx, c, l, "ta", etcd.ScopeAll, values("x", "1"))
	if err != nil {
		t.Fatal(err)
	}
	a.waitRevision(t, "ta", rev, 15*time.Second, nil)
	err = a.sources["tb"].RequestProgress(ctx)
	if !errors.Is(err, etcd.ErrProgressUnsupported) || !strings.Contains(err.Error(), "etcd 3.4.") {
		t.Fatalf("RequestProgress against Debian's etcd: %v, want ErrProgressUnsupported naming the version", err)
	}
	t.Log(err)
}
