package reconcilercell

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/health"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// module is a hive module that owns a table and registers a reconciler of
// it, named like the module; the reconciler of "bad" fails its object bad.
type module struct {
	id    string
	db    *statedb.DB
	table statedb.RWTable[*object]
	rec   reconciler.Reconciler[*object]
	edit  func(*reconciler.Config[*object]) // changes the config, if set
	err   error                             // Register's
}

func (m *module) cell() cell.Cell {
	return cell.Module(m.id, "Reconciles "+m.id,
		cell.ProvidePrivate(func(db *statedb.DB) (statedb.RWTable[*object], error) {
			return statedb.NewTable(db, m.id, idIndex, statusIndex)
		}),
		cell.Invoke(func(p Params, tbl statedb.RWTable[*object]) error {
			m.db, m.table = p.DB, tbl
			cfg := config(m.id, tbl, newTarget("bad"))
			if m.edit != nil {
				m.edit(&cfg)
			}
			m.rec, m.err = Register(p, cfg)
			return m.err
		}),
	)
}

func newHive(mods ...*module) *hive.Hive {
	cells := []cell.Cell{
		MetricsCell,
		cell.Module("db", "The state database", cell.Provide(func() *statedb.DB { return statedb.New() })),
	}
	for _, m := range mods {
		cells = append(cells, m.cell())
	}
	return hive.NewWithOptions(hive.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, cells...)
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

// Two modules each register a reconciler: both run as jobs of their
// module, reconcile, report their health as module → job → reconciler (a
// failing reconciler makes its job and module Degraded),
// their metrics to the hive's registry with their own labels, and stop
// with the hive.
func TestRegister(t *testing.T) {
	mods := []*module{{id: "routes"}, {id: "rules"}}
	h := newHive(mods...)
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

	for _, m := range mods {
		if err := reconciled(t, m.rec, insert(m.db, m.table, "a", "b", "c")); err != nil {
			t.Fatalf("module %s: %v", m.id, err)
		}
	}
	// rules gets an object that fails.
	if err := reconciled(t, mods[1].rec, insert(mods[1].db, mods[1].table, "bad")); !errors.Is(err, reconciler.ErrNotAllReconciled) {
		t.Fatalf("rules: bad did not fail: %v", err)
	}

	for _, tc := range []struct {
		module, level, message string
	}{
		{"routes", string(health.LevelOK), "3 objects reconciled"},
		{"rules", string(health.LevelDegraded), "1 of 4 objects failing"},
	} {
		eventually(t, tc.module+" health", func() bool {
			snap := h.Health().Snapshot()
			job, okJob := findScope(snap, tc.module, "reconcile-"+tc.module)
			rec, okRec := findScope(job, "reconciler")
			// The job reports "running"; its level is the worst of that
			// and its reconciler's (see package health).
			return okJob && okRec && job.Message == "running" && string(job.Level) == tc.level &&
				string(rec.Level) == tc.level && strings.Contains(rec.Message, tc.message)
		})
	}

	got := gather(t, h.Registry())
	for _, m := range mods {
		for _, key := range []string{
			`steadystate_reconciler_operations_total{operation="update",reconciler="` + m.id + `",result="ok",table="` + m.id + `"}`,
			`steadystate_reconciler_objects{reconciler="` + m.id + `",status="Done",table="` + m.id + `"}`,
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
	// Run returned: a reconciler can run again only once the first Run
	// ended (a second Run fails while one is in progress).
	for _, m := range mods {
		runCtx, cancel := context.WithCancel(ctx)
		cancel()
		if err := m.rec.Run(runCtx); err != nil {
			t.Errorf("module %s: Run after Stop: %v, want the reconciler stopped", m.id, err)
		}
	}
}

// recordingHealth records the levels reported to it.
type recordingHealth struct{ levels chan string }

func (h recordingHealth) OK(string)              { h.levels <- "OK" }
func (h recordingHealth) Degraded(string, error) { h.levels <- "Degraded" }
func (h recordingHealth) Stopped(string)         { h.levels <- "Stopped" }

// Fields of the config that are set are kept: a Health of one's own gets
// the reports, and no reconciler scope is opened.
func TestRegisterKeepsSetFields(t *testing.T) {
	own := recordingHealth{levels: make(chan string, 100)}
	m := &module{id: "routes", edit: func(cfg *reconciler.Config[*object]) { cfg.Health = own }}
	h := newHive(m)
	ctx := context.Background()
	if err := h.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if got := <-own.levels; got != "OK" {
		t.Fatalf("first report to the config's Health: %s, want OK", got)
	}
	job, ok := findScope(h.Health().Snapshot(), "routes", "reconcile-routes")
	if !ok {
		t.Fatal("no job scope")
	}
	if len(job.Children) != 0 {
		t.Fatalf("job scope has children %v, want none: the config's Health is kept", job.Children)
	}
	if err := h.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// Register's errors fail the hive's construction: a bad config, and a
// second reconciler of the same name and table.
func TestRegisterErrors(t *testing.T) {
	bad := &module{id: "routes", edit: func(cfg *reconciler.Config[*object]) { cfg.Name = "Bad Name" }}
	if err := newHive(bad).Populate(); !errors.Is(bad.err, reconciler.ErrInvalidConfig) || err == nil {
		t.Fatalf("a bad config: Register %v, Populate %v; want ErrInvalidConfig", bad.err, err)
	}

	twice := &module{id: "routes"}
	h := newHive(twice, &module{id: "other", edit: func(cfg *reconciler.Config[*object]) {
		// The same reconciler name and table as the first module's.
		cfg.Name, cfg.Table = "routes", twice.table
	}})
	err := h.Populate()
	var already prometheus.AlreadyRegisteredError
	if !errors.As(err, &already) || !strings.Contains(err.Error(), `reconciler "routes" of table "routes"`) {
		t.Fatalf("two reconcilers of one name and table: Populate %v, want the registry's error naming them", err)
	}
}
