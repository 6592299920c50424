package statedb

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestPrometheusMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := NewPrometheusMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	db := New(WithMetrics(m))
	tbl, err := NewTable(db, "objs", idIndex)
	if err != nil {
		t.Fatal(err)
	}
	wtxn := db.WriteTxn(tbl)
	iter, _ := tbl.Changes(wtxn)
	tbl.Insert(wtxn, &testObject{ID: 1})
	tbl.Insert(wtxn, &testObject{ID: 2})
	wtxn.Commit()
	wtxn = db.WriteTxn(tbl)
	tbl.Delete(wtxn, &testObject{ID: 1})
	wtxn.Commit()

	const want = `
# HELP steadystate_statedb_table_change_iterators Registered change iterators of the table.
# TYPE steadystate_statedb_table_change_iterators gauge
steadystate_statedb_table_change_iterators{table="objs"} 1
# HELP steadystate_statedb_table_graveyard_objects Deleted objects kept until every change iterator has seen them.
# TYPE steadystate_statedb_table_graveyard_objects gauge
steadystate_statedb_table_graveyard_objects{table="objs"} 1
# HELP steadystate_statedb_table_objects Number of objects in the table.
# TYPE steadystate_statedb_table_objects gauge
steadystate_statedb_table_objects{table="objs"} 1
# HELP steadystate_statedb_table_revision Current revision of the table.
# TYPE steadystate_statedb_table_revision gauge
steadystate_statedb_table_revision{table="objs"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"steadystate_statedb_table_change_iterators", "steadystate_statedb_table_graveyard_objects",
		"steadystate_statedb_table_objects", "steadystate_statedb_table_revision"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "steadystate_statedb_write_txn_duration_seconds"); n != 1 {
		t.Fatalf("write txn duration series = %d, want 1", n)
	}
	if n := testutil.CollectAndCount(reg, "steadystate_statedb_write_txn_lock_wait_seconds"); n != 1 {
		t.Fatalf("lock wait series = %d, want 1", n)
	}
	iter.Close()
	if got := testutil.ToFloat64(m.iterators.WithLabelValues("objs")); got != 0 {
		t.Fatalf("iterators after Close = %v", got)
	}

	// A second DB on another registry works; the same registry is an error,
	// not a panic.
	if _, err := NewPrometheusMetrics(prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	if _, err := NewPrometheusMetrics(reg); err == nil {
		t.Fatal("registering twice on one registry: want error")
	}
}
