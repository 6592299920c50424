package reconcilercell

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
)

// A reconciler's metrics have exactly the names and labels of the package
// doc: operations by result and their durations, queued retries, prune and
// full reconciliation durations, and objects by status; no errors gauge.
func TestPrometheusMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := NewPrometheusMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewPrometheusMetrics(reg); err == nil {
		t.Fatal("registering the metrics twice on one registry did not fail")
	}
	db, tbl := newTable(t, "routes")
	cfg := config("rec", tbl, newTarget("bad"))
	cfg.Metrics = m
	reg.MustRegister(NewStatusCollector("rec", db, tbl.ToTable(), getStatus))
	target := cfg.Target.(*reconcilertest.Target[*object])
	r := reconcilertest.Start(t, db, cfg)

	insert(db, tbl, "a", "b", "bad")
	if err := r.Reconciled(); !errors.Is(err, reconciler.ErrNotAllReconciled) {
		t.Fatalf("bad did not fail: %v", err)
	}
	remove(db, tbl, "a")
	if err := r.Reconciled(); !errors.Is(err, reconciler.ErrNotAllReconciled) {
		t.Fatalf("bad is still failing: %v", err)
	}
	r.Prune()
	const full = `steadystate_reconciler_prune_round_duration_seconds{reconciler="rec",result="ok",table="routes"}`
	target.WaitUntil(t, "a prune", func() bool { return target.Count(reconciler.OpPrune, "") == 1 })
	eventually(t, "the full reconciliation's metrics", func() bool { return gather(t, reg)[full] == 1 })
	// A good prune retries the failing objects at once: bad fails again
	// and waits for its next retry, an hour away.
	const failed = `steadystate_reconciler_operations_total{operation="update",reconciler="rec",result="error",table="routes"}`
	const queued = `steadystate_reconciler_queued_retries{reconciler="rec",table="routes"}`
	eventually(t, "bad retried after the prune", func() bool { m := gather(t, reg); return m[failed] == 2 && m[queued] == 1 })

	// The prune refreshes nothing (refresh is by age, RefreshInterval); a
	// is gone. No operation is running or stuck.
	want := map[string]float64{
		`steadystate_reconciler_operations_total{operation="update",reconciler="rec",result="ok",table="routes"}`: 2,
		failed: 2,
		`steadystate_reconciler_operations_total{operation="delete",reconciler="rec",result="ok",table="routes"}`: 1,
		`steadystate_reconciler_operation_duration_seconds{operation="update",reconciler="rec",table="routes"}`:   4,
		`steadystate_reconciler_operation_duration_seconds{operation="delete",reconciler="rec",table="routes"}`:   1,
		`steadystate_reconciler_workers_busy{reconciler="rec",table="routes"}`:                                    0,
		`steadystate_reconciler_stuck_operations{reconciler="rec",table="routes"}`:                                0,
		queued: 1,
		`steadystate_reconciler_prune_duration_seconds{reconciler="rec",result="ok",table="routes"}`: 1,
		full: 1,
		`steadystate_reconciler_objects{reconciler="rec",status="Pending",table="routes"}`:    0,
		`steadystate_reconciler_objects{reconciler="rec",status="Refreshing",table="routes"}`: 0,
		`steadystate_reconciler_objects{reconciler="rec",status="Done",table="routes"}`:       1,
		`steadystate_reconciler_objects{reconciler="rec",status="Error",table="routes"}`:      1,
	}
	got := gather(t, reg)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected series %s = %v", k, v)
		}
	}
}

// One registry serves many reconcilers: their series are told apart by the
// reconciler and table labels.
func TestStatusCollectorTwoReconcilers(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	for _, name := range []string{"routes", "rules"} {
		db, tbl := newTable(t, name)
		wtxn := db.WriteTxn(tbl)
		for i := range 3 {
			tbl.Insert(wtxn, &object{ID: fmt.Sprint(i), Status: reconciler.StatusDone()})
		}
		wtxn.Commit()
		if err := reg.Register(NewStatusCollector(name+"-rec", db, tbl.ToTable(), getStatus)); err != nil {
			t.Fatalf("registering the status collector of %q: %v", name, err)
		}
	}
	got := gather(t, reg)
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	for _, name := range []string{"routes", "rules"} {
		k := fmt.Sprintf(`steadystate_reconciler_objects{reconciler="%s-rec",status="Done",table="%s"}`, name, name)
		if got[k] != 3 {
			t.Errorf("%s = %v, want 3 (have %v)", k, got[k], slices.Sorted(slices.Values(keys)))
		}
	}
}

// Drift that a target reports and the reconciler repairs is counted:
// steadystate_reconciler_drift_reports_total, drift_checked_total and
// drift_repaired_total.
func TestDriftMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := NewPrometheusMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	db, tbl := newTable(t, "routes")
	target := newTarget().ReportsDrift()
	cfg := config("rec", tbl, target.Planner(func(a, b *object) bool { return true }))
	cfg.Metrics = m
	r := reconcilertest.Start(t, db, cfg)
	insert(db, tbl, "a")
	if err := r.Reconciled(); err != nil {
		t.Fatal(err)
	}
	target.WaitUntil(t, "the drift watch", func() bool { running, _ := target.DriftWatches(); return running == 1 })
	const (
		repaired = `steadystate_reconciler_drift_repaired_total{reconciler="rec",table="routes"}`
		reports  = `steadystate_reconciler_drift_reports_total{reconciler="rec",table="routes"}`
		checked  = `steadystate_reconciler_drift_checked_total{reconciler="rec",table="routes"}`
	)
	// The watch's ChangedAll is a report; a is checked once it is Done.
	eventually(t, "the watch's first report", func() bool { return gather(t, reg)[reports] >= 1 })
	before := gather(t, reg)
	target.RemoveState("a")
	target.ReportDrift(index.String("a"), index.String("a"), index.String("nosuch"))
	eventually(t, "the repair counted", func() bool { return gather(t, reg)[repaired] == 1 })
	got := gather(t, reg)
	if d := got[reports] - before[reports]; d != 2 {
		t.Errorf("%s grew by %v for two reports of a and one of an object not in the table, want 2", reports, d)
	}
	if d := got[checked] - before[checked]; d < 1 || d > 2 {
		t.Errorf("%s grew by %v, want 1 or 2 (the reports may come in one round or two)", checked, d)
	}
}
