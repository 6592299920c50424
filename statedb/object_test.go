package statedb

import (
	"fmt"
	"testing"

	"github.com/steadystate/steadystate/index"
)

// An object is stored as one pointer (tree.go): the value itself for a
// pointer-shaped type, a pointer to a copy for any other. These tables of
// other kinds of Obj read back exactly what was written, through every
// kind of read, after replaces and deletes and across snapshots.

type valueObj struct {
	ID   uint64
	Name string
}

type namer interface{ name() string }

func (v valueObj) name() string { return v.Name }

func TestObjectKinds(t *testing.T) {
	t.Run("struct", func(t *testing.T) {
		idx := Index[valueObj, uint64]{Name: "id", Unique: true,
			FromObject: func(o valueObj) index.KeySet { return index.NewKeySet(index.Uint64(o.ID)) }, FromKey: index.Uint64}
		checkObjectKind(t, idx, func(id uint64, gen int) valueObj { return valueObj{ID: id, Name: fmt.Sprint(gen)} },
			func(o valueObj) string { return fmt.Sprint(o.ID, o.Name) })
	})
	t.Run("interface", func(t *testing.T) {
		idx := Index[namer, string]{Name: "name", Unique: true,
			FromObject: func(o namer) index.KeySet { return index.NewKeySet(index.String(o.name()[:2])) }, FromKey: index.String}
		checkObjectKind(t, idx, func(id uint64, gen int) namer { return valueObj{ID: id, Name: fmt.Sprintf("%02d-%d", id, gen)} },
			func(o namer) string { return o.name() })
	})
	t.Run("map", func(t *testing.T) {
		idx := Index[map[string]int, int]{Name: "id", Unique: true,
			FromObject: func(o map[string]int) index.KeySet { return index.NewKeySet(index.Int(o["id"])) }, FromKey: index.Int}
		checkObjectKind(t, idx, func(id uint64, gen int) map[string]int { return map[string]int{"id": int(id), "gen": gen} },
			func(o map[string]int) string { return fmt.Sprint(o["id"], o["gen"]) })
	})
}

// checkObjectKind writes objects 0..9 of generation 1, replaces the even
// ones with generation 2, deletes 9, and compares every read with what was
// written; a snapshot taken before the replaces still reads generation 1.
func checkObjectKind[Obj any, Key any](t *testing.T, idx Index[Obj, Key], mk func(id uint64, gen int) Obj, show func(Obj) string) {
	t.Helper()
	db := New()
	tbl, err := NewTable(db, "objs", idx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	wtxn := db.WriteTxn(tbl)
	for id := range uint64(10) {
		o := mk(id, 1)
		if _, _, err := tbl.Insert(wtxn, o); err != nil {
			t.Fatal(err)
		}
		want[show(o)] = true
	}
	old := wtxn.Commit()
	oldWant := map[string]bool{}
	for k := range want {
		oldWant[k] = true
	}
	wtxn = db.WriteTxn(tbl)
	for id := uint64(0); id < 10; id += 2 {
		o := mk(id, 2)
		prev, had, err := tbl.Insert(wtxn, o)
		if err != nil || !had || show(prev) != show(mk(id, 1)) {
			t.Fatalf("replace %d: old %s, %v, %v", id, show(prev), had, err)
		}
		delete(want, show(prev))
		want[show(o)] = true
	}
	gone := mk(9, 1)
	if prev, had, err := tbl.Delete(wtxn, gone); err != nil || !had || show(prev) != show(gone) {
		t.Fatalf("delete: %s, %v, %v", show(prev), had, err)
	}
	delete(want, show(gone))
	txn := wtxn.Commit()
	for name, c := range map[string]struct {
		txn  ReadTxn
		want map[string]bool
	}{"now": {txn, want}, "snapshot": {old, oldWant}} {
		got := map[string]bool{}
		for o := range tbl.All(c.txn) {
			got[show(o)] = true
			if o2, _, found := tbl.Get(c.txn, QueryByPrimaryKey[Obj](tbl, tbl.(*table[Obj]).PrimaryKey(o))); !found || show(o2) != show(o) {
				t.Errorf("%s: Get of %s = %s, %v", name, show(o), show(o2), found)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: All = %v, want %v", name, got, c.want)
		}
	}
}
