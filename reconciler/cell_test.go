package reconciler

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/health"
	"github.com/steadystate/steadystate/statedb"
)

// Two modules each register a reconciler with Register from an Invoke,
// with MetricsCell included: both run as jobs of their module, reconcile,
// report health in their module's tree and metrics to the hive's registry,
// and stop with the hive.
func TestHiveRegister(t *testing.T) {
	type module struct {
		id     string
		table  statedb.RWTable[*testObj]
		target *testTarget
		rec    Reconciler[*testObj]
	}
	mods := []*module{{id: "routes"}, {id: "rules"}}

	reconcilerModule := func(m *module) cell.Cell {
		return cell.Module(m.id, "Reconciles "+m.id,
			cell.ProvidePrivate(func(db *statedb.DB) (statedb.RWTable[*testObj], error) {
				return statedb.NewTable(db, m.id, testIDIndex, testStatusIndex)
			}),
			cell.Invoke(func(p Params, tbl statedb.RWTable[*testObj]) error {
				m.table, m.target = tbl, newTestTarget()
				cfg := testConfig(tbl, m.target)
				cfg.Name = m.id
				var err error
				m.rec, err = Register(p, cfg)
				return err
			}),
		)
	}
	h := hive.NewWithOptions(hive.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		MetricsCell,
		cell.Module("db", "The state database", cell.Provide(func() *statedb.DB { return statedb.New() })),
		reconcilerModule(mods[0]),
		reconcilerModule(mods[1]),
	)
	ctx := context.Background()
	if err := h.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	stopped := false
	defer func() {
		if !stopped {
			h.Stop(ctx)
		}
	}()

	var db *statedb.DB
	for _, m := range mods {
		if m.rec == nil {
			t.Fatalf("module %s: Register was not called", m.id)
		}
		db = m.rec.(*reconciler[*testObj]).db
		wtxn := db.WriteTxn(m.table)
		for i := range 3 {
			m.table.Insert(wtxn, &testObj{ID: fmt.Sprint(i), Value: i, Status: StatusPending()})
		}
		rev := m.table.Revision(wtxn.Commit())
		wctx, cancel := context.WithTimeout(ctx, waitTimeout)
		_, err := m.rec.WaitUntilReconciled(wctx, rev)
		cancel()
		if err != nil {
			t.Fatalf("module %s: WaitUntilReconciled: %v", m.id, err)
		}
		for obj := range m.table.All(db.ReadTxn()) {
			if obj.Status.Kind != StatusKindDone {
				t.Errorf("module %s: %v not Done", m.id, obj)
			}
		}
		if got := len(m.target.realState()); got != 3 {
			t.Errorf("module %s: real system has %d objects, want 3", m.id, got)
		}
	}

	// Each module's health scope has the reconciler's job, which reports
	// the reconciler's health.
	for _, m := range mods {
		eventually(t, m.id+" health", func() bool {
			job, ok := findScope(h.Health().Snapshot(), m.id, "reconcile-"+m.id)
			return ok && job.Level == cell.LevelOK && strings.Contains(job.Message, "3 objects")
		})
	}

	// Metrics go to the hive's registry, labelled by reconciler.
	got := gather(t, h.Registry())
	for _, m := range mods {
		for _, key := range []string{
			"steadystate_reconciler_operations_total{name=" + m.id + ",operation=update,result=ok}",
			"steadystate_reconciler_objects{name=" + m.id + ",status=Done}",
		} {
			if got[key] != 3 {
				t.Errorf("%s = %v, want 3", key, got[key])
			}
		}
	}

	stopped = true
	if err := h.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	for _, m := range mods {
		r := m.rec.(*reconciler[*testObj])
		r.mu.Lock()
		running := r.running
		r.mu.Unlock()
		if running {
			t.Errorf("module %s: reconciler still running after Stop", m.id)
		}
	}
}

// findScope finds the scope at path below s.
func findScope(s health.Status, path ...string) (health.Status, bool) {
	if len(path) == 0 {
		return s, true
	}
	for _, c := range s.Children {
		if c.Name == path[0] {
			return findScope(c, path[1:]...)
		}
	}
	return health.Status{}, false
}
