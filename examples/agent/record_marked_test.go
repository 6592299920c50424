package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
	"github.com/steadystate/steadystate/statedb"
)

// markedTarget is a batch target whose objects the kernel marks, as the
// routes target's.
type markedTarget struct {
	reconcilertest.BatchTarget[*recVal]
}

func (markedTarget) KernelMarksOwned() bool { return true }

// A kernel-marked target's objects are not recorded: its batches and
// single operations write nothing to the record, deletes are still logged,
// and its first prune drops the record an earlier version kept of the
// table (and leaves the other tables' records alone).
func TestRecordSkipsKernelMarked(t *testing.T) {
	rec := testRecord(t)
	// An earlier version recorded the table, and another table.
	if err := rec.put(appliedBucket("vals"), []byte("old"), []byte(`{"name":"old"}`)); err != nil {
		t.Fatal(err)
	}
	if err := rec.put(appliedBucket("others"), []byte("x"), []byte(`{"name":"x"}`)); err != nil {
		t.Fatal(err)
	}
	inner := reconcilertest.NewTarget(func(o *recVal) string { return o.Name })
	var logs bytes.Buffer
	key := func(o *recVal) index.Key { return index.Key(o.Name) }
	wrapped := recordTarget[*recVal](markedTarget{inner.Batch()}, rec, "vals", key, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	b, ok := wrapped.(reconciler.BatchTarget[*recVal])
	if !ok {
		t.Fatalf("the wrapper of a batch target is a %T", wrapped)
	}
	before := lastTxID(t, rec)
	ctx := context.Background()
	batch := []reconciler.BatchEntry[*recVal]{{Object: &recVal{Name: "a", Value: 1}}, {Object: &recVal{Name: "b", Value: 2}}}
	b.UpdateBatch(ctx, nil, batch)
	if err := wrapped.Update(ctx, nil, &recVal{Name: "c", Value: 3}); err != nil {
		t.Fatal(err)
	}
	for _, e := range batch {
		if e.Result != nil {
			t.Fatalf("%s: %v", e.Object.Name, e.Result)
		}
	}
	gone := []reconciler.BatchEntry[*recVal]{{Object: &recVal{Name: "b", Value: 2}}}
	b.DeleteBatch(ctx, nil, gone)
	if gone[0].Result != nil {
		t.Fatal(gone[0].Result)
	}
	if got := lastTxID(t, rec); got != before {
		t.Errorf("the record was written %d times for a kernel-marked target", got-before)
	}
	if !strings.Contains(logs.String(), "Removed") {
		t.Errorf("the delete was not logged:\n%s", logs.String())
	}
	// The first prune drops the table's old record; the next writes nothing.
	desired := func(yield func(*recVal, statedb.Revision) bool) { yield(&recVal{Name: "a", Value: 1}, 1) }
	if err := wrapped.Prune(ctx, nil, desired); err != nil {
		t.Fatal(err)
	}
	if m, err := rec.applied("vals"); err != nil || len(m) != 0 {
		t.Errorf("after the first prune the record of the table holds %v (%v), want nothing", m, err)
	}
	if m, err := rec.applied("others"); err != nil || len(m) != 1 {
		t.Errorf("the other table's record holds %v (%v), want it kept", m, err)
	}
	after := lastTxID(t, rec)
	if err := wrapped.Prune(ctx, nil, desired); err != nil {
		t.Fatal(err)
	}
	if got := lastTxID(t, rec); got != after {
		t.Errorf("a later prune wrote the record %d times", got-after)
	}
}
