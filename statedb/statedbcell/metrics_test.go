package statedbcell

import (
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/steadystate/steadystate/statedb"
)

// gather returns every sample of reg as `name{k="v",...}` -> value (the
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
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
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

// The metrics have the names and the table label of the package doc, and
// follow the DB: objects, revision, graveyard, change iterators, one lock
// wait and one duration per WriteTxn of the table.
func TestPrometheusMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := NewPrometheusMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	db := statedb.New(statedb.WithMetrics(m))
	tbl, err := statedb.NewTable(db, "objs", idIndex)
	if err != nil {
		t.Fatal(err)
	}
	wtxn := db.WriteTxn(tbl)
	iter, err := tbl.Changes(wtxn)
	if err != nil {
		t.Fatal(err)
	}
	tbl.Insert(wtxn, &object{ID: 1})
	tbl.Insert(wtxn, &object{ID: 2})
	wtxn.Commit()
	wtxn = db.WriteTxn(tbl)
	tbl.Delete(wtxn, &object{ID: 1})
	wtxn.Commit()

	want := map[string]float64{
		`steadystate_statedb_table_change_iterators{table="objs"}`:      1,
		`steadystate_statedb_table_graveyard_objects{table="objs"}`:     1,
		`steadystate_statedb_table_objects{table="objs"}`:               1,
		`steadystate_statedb_table_revision{table="objs"}`:              3,
		`steadystate_statedb_write_txn_duration_seconds{table="objs"}`:  2,
		`steadystate_statedb_write_txn_lock_wait_seconds{table="objs"}`: 2,
	}
	got := gather(t, reg)
	var names []string
	for k := range got {
		names = append(names, k)
	}
	slices.Sort(names)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("the registry has %v, want exactly the series %v", names, want)
	}

	iter.Close()
	if got := gather(t, reg)[`steadystate_statedb_table_change_iterators{table="objs"}`]; got != 0 {
		t.Fatalf("change iterators after Close = %v, want 0", got)
	}

	// A second DB on another registry works; on the same registry it is an
	// error, not a panic.
	if _, err := NewPrometheusMetrics(prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	if _, err := NewPrometheusMetrics(reg); err == nil {
		t.Fatal("registering twice on one registry: want an error")
	}
}
