package reconciler_test

import (
	"maps"
	"testing"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// countObj is the object of the CountByStatus test.
type countObj struct {
	ID     int
	Status reconciler.Status
}

// CountByStatus counts by kind, with a zero for each kind asked for (or
// for each of Pending..Error); given kinds and a table with the status
// index it reads only the index, never an object's status.
func TestCountByStatus(t *testing.T) {
	byID := statedb.Index[*countObj, int]{
		Name:       "id",
		FromObject: func(o *countObj) index.KeySet { return index.NewKeySet(index.Int(o.ID)) },
		FromKey:    index.Int,
		Unique:     true,
	}
	calls := 0
	getStatus := func(o *countObj) reconciler.Status { calls++; return o.Status }
	kinds := []reconciler.StatusKind{
		reconciler.StatusKindDone, reconciler.StatusKindDone, reconciler.StatusKindDone,
		reconciler.StatusKindError, reconciler.StatusKindPending, reconciler.StatusKindUnset,
	}
	db := statedb.New()
	plain, err := statedb.NewTable(db, "plain", byID)
	if err != nil {
		t.Fatal(err)
	}
	indexed, err := statedb.NewTable(db, "indexed", byID, reconciler.StatusIndex(func(o *countObj) reconciler.Status { return o.Status }))
	if err != nil {
		t.Fatal(err)
	}
	wtxn := db.WriteTxn(plain, indexed)
	for i, k := range kinds {
		plain.Insert(wtxn, &countObj{ID: i, Status: reconciler.Status{Kind: k}})
		indexed.Insert(wtxn, &countObj{ID: i, Status: reconciler.Status{Kind: k}})
	}
	txn := wtxn.Commit()

	all := map[reconciler.StatusKind]int{
		reconciler.StatusKindUnset: 1, reconciler.StatusKindPending: 1, reconciler.StatusKindRefreshing: 0,
		reconciler.StatusKindDone: 3, reconciler.StatusKindError: 1,
	}
	notDone := map[reconciler.StatusKind]int{
		reconciler.StatusKindPending: 1, reconciler.StatusKindRefreshing: 0, reconciler.StatusKindError: 1,
	}
	for _, tc := range []struct {
		name      string
		table     statedb.Table[*countObj]
		kinds     []reconciler.StatusKind
		want      map[reconciler.StatusKind]int
		wantCalls int // of getStatus
	}{
		{"every kind, one pass", plain, nil, all, len(kinds)},
		{"every kind, status index", indexed, nil, all, len(kinds)},
		{"some kinds, one pass", plain, []reconciler.StatusKind{reconciler.StatusKindPending, reconciler.StatusKindRefreshing, reconciler.StatusKindError}, notDone, len(kinds)},
		{"some kinds, status index", indexed, []reconciler.StatusKind{reconciler.StatusKindPending, reconciler.StatusKindRefreshing, reconciler.StatusKindError}, notDone, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls = 0
			got := reconciler.CountByStatus(txn, tc.table, getStatus, tc.kinds...)
			if !maps.Equal(got, tc.want) {
				t.Errorf("counts %v, want %v", got, tc.want)
			}
			if calls != tc.wantCalls {
				t.Errorf("getStatus called %d times, want %d", calls, tc.wantCalls)
			}
		})
	}

	// A table not in the snapshot has nothing of any kind.
	late, err := statedb.NewTable(db, "late", byID)
	if err != nil {
		t.Fatal(err)
	}
	if got := reconciler.CountByStatus(txn, late, getStatus, reconciler.StatusKindDone); got[reconciler.StatusKindDone] != 0 || len(got) != 1 {
		t.Errorf("a table not in the snapshot: %v", got)
	}
}
