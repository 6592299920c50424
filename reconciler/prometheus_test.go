package reconciler

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// gather returns every sample of reg as "name{k=v,...}" -> value (the
// sample count for histograms), labels sorted by name.
func gather(t testing.TB, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, fam := range families {
		for _, m := range fam.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(labels)
			key := fam.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// The Prometheus metrics appear on the registry with name and operation
// labels: operations by result, their durations, errors, queued retries,
// prune and full reconciliation durations, and objects by status.
func TestPrometheusMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := NewPrometheusMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewPrometheusMetrics(reg); err == nil {
		t.Fatal("registering the metrics twice on one registry did not fail")
	}

	f := newFixture(t, false)
	f.cfg.Metrics = m
	reg.MustRegister(NewStatusCollector("test", f.db, f.table.ToTable(), getTestStatus))
	f.target.set("bad", &behavior{forever: true})
	f.start()
	f.insert(&testObj{ID: "a", Value: 1}, &testObj{ID: "b", Value: 2}, &testObj{ID: "bad", Value: 3})
	f.waitStatus("bad", StatusKindError, "")
	f.delete("a")
	f.waitReconciled()
	f.rec.Prune()
	waitUntil(t, "a prune and refresh", f.target.watch(func(tt *testTarget) bool {
		return slices.Contains(tt.ops, "prune") && tt.ops[len(tt.ops)-1] != "prune"
	}))

	want := map[string]float64{
		`steadystate_reconciler_operations_total{name=test,operation=update,result=ok}`:    2,
		`steadystate_reconciler_operations_total{name=test,operation=delete,result=ok}`:    1,
		`steadystate_reconciler_operation_duration_seconds{name=test,operation=delete}`:    1,
		`steadystate_reconciler_errors{name=test}`:                                         1,
		`steadystate_reconciler_queued_retries{name=test}`:                                 1,
		`steadystate_reconciler_prune_duration_seconds{name=test,result=ok}`:               1,
		`steadystate_reconciler_full_reconciliation_duration_seconds{name=test,result=ok}`: 1,
		`steadystate_reconciler_objects{name=test,status=Done}`:                            1,
		`steadystate_reconciler_objects{name=test,status=Error}`:                           1,
		`steadystate_reconciler_objects{name=test,status=Pending}`:                         0,
	}
	var got map[string]float64
	eventually(t, "the metrics", func() bool {
		got = gather(t, reg)
		for k, v := range want {
			if got[k] != v {
				return false
			}
		}
		// bad is retried forever: its failures only grow.
		return got[`steadystate_reconciler_operations_total{name=test,operation=update,result=error}`] >= 2 &&
			got[`steadystate_reconciler_operation_duration_seconds{name=test,operation=update}`] >= 3 &&
			got[`steadystate_reconciler_operations_total{name=test,operation=refresh,result=ok}`] == 1
	})
	if t.Failed() {
		for k, v := range got {
			t.Logf("%s %v", k, v)
		}
	}
}

// One registry serves many reconcilers: their object counts are told apart
// by the name label.
func TestStatusCollectorTwoReconcilers(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	for _, name := range []string{"routes", "rules"} {
		db, tbl := newTestTable(t)
		wtxn := db.WriteTxn(tbl)
		for i := range 3 {
			tbl.Insert(wtxn, &testObj{ID: fmt.Sprint(i), Status: StatusDone()})
		}
		wtxn.Commit()
		if err := reg.Register(NewStatusCollector(name, db, tbl.ToTable(), getTestStatus)); err != nil {
			t.Fatalf("registering the status collector of %q: %v", name, err)
		}
	}
	got := gather(t, reg)
	for _, name := range []string{"routes", "rules"} {
		if v := got["steadystate_reconciler_objects{name="+name+",status=Done}"]; v != 3 {
			t.Errorf("%s: %v objects Done, want 3 (%v)", name, v, got)
		}
	}
}
