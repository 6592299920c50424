package statedb

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/steadystate/steadystate/index"
)

// mergeTags is a merge for Modify: a fresh object with the new name and
// the union of the tags, leaving both arguments as they are.
func mergeTags(old, new *testObject) *testObject {
	m := &testObject{ID: new.ID, Name: new.Name, Tags: slices.Clone(old.Tags)}
	for _, t := range new.Tags {
		if !slices.Contains(m.Tags, t) {
			m.Tags = append(m.Tags, t)
		}
	}
	return m
}

// TestModify: Modify inserts when nothing is stored (merge is not called),
// merges otherwise, updates every index, and never changes the stored
// object.
func TestModify(t *testing.T) {
	db, tbl := newTestTable(t, "objs", tagIndex, nameIndex)
	calls := 0
	merge := func(old, new *testObject) *testObject { calls++; return mergeTags(old, new) }

	wtxn := db.WriteTxn(tbl)
	first := &testObject{ID: 1, Name: "one", Tags: []string{"a"}}
	if old, had, err := tbl.Modify(wtxn, first, merge); err != nil || had || old != nil || calls != 0 {
		t.Fatalf("Modify of a new object: old %v had %v err %v, merge called %d times", old, had, err, calls)
	}
	before := wtxn.Commit()
	stored, rev1, _ := tbl.Get(before, idIndex.Query(1))
	if stored != first {
		t.Fatalf("Modify of a new object stored %v, want the object itself", stored)
	}

	wtxn = db.WriteTxn(tbl)
	old, had, err := tbl.Modify(wtxn, &testObject{ID: 1, Name: "uno", Tags: []string{"b"}}, merge)
	if err != nil || !had || old != first || calls != 1 {
		t.Fatalf("Modify of a stored object: old %v had %v err %v, merge called %d times", old, had, err, calls)
	}
	rtxn := wtxn.Commit()
	got, rev2, _ := tbl.Get(rtxn, idIndex.Query(1))
	if got.Name != "uno" || !slices.Equal(got.Tags, []string{"a", "b"}) || rev2 <= rev1 {
		t.Fatalf("after Modify: %+v at revision %d (was %d)", got, rev2, rev1)
	}
	// The stored object is untouched; every index follows the merge.
	if first.Name != "one" || !slices.Equal(first.Tags, []string{"a"}) {
		t.Fatalf("Modify changed the stored object: %+v", first)
	}
	if _, _, ok := tbl.Get(rtxn, nameIndex.Query("one")); ok {
		t.Error("the old name is still indexed")
	}
	for _, q := range []Query[*testObject]{nameIndex.Query("uno"), tagIndex.Query("a"), tagIndex.Query("b")} {
		if o, _, ok := tbl.Get(rtxn, q); !ok || o != got {
			t.Errorf("%s %q: got %v, want the merged object", q.IndexName(), q.Key(), o)
		}
	}
	// The snapshot before the Modify still has the old object.
	if o, _, _ := tbl.Get(before, idIndex.Query(1)); o != first {
		t.Fatalf("the snapshot before Modify has %+v", o)
	}
}

// TestModifyErrors: Modify fails like Insert, and also when merge changes
// the primary key; nothing is written then.
func TestModifyErrors(t *testing.T) {
	db, tbl := newTestTable(t, "objs", tagIndex, nameIndex)
	noKey := Index[*testObject, uint64]{
		Name:       "id",
		FromObject: func(*testObject) index.KeySet { return index.NewKeySet() },
		FromKey:    index.Uint64,
		Unique:     true,
	}
	keyless, err := NewTable(db, "keyless", noKey)
	if err != nil {
		t.Fatal(err)
	}
	wtxn := db.WriteTxn(tbl)
	tbl.Insert(wtxn, &testObject{ID: 1, Name: "one"})
	tbl.Insert(wtxn, &testObject{ID: 2, Name: "two"})
	wtxn.Commit()
	keep := func(old, new *testObject) *testObject { return mergeTags(old, new) }

	for _, tc := range []struct {
		what     string
		modify   func() error
		sentinel error
		names    []string
	}{
		{"through a closed WriteTxn", func() error {
			wtxn := db.WriteTxn(tbl)
			wtxn.Commit()
			_, _, err := tbl.Modify(wtxn, &testObject{ID: 1}, keep)
			return err
		}, ErrTransactionClosed, []string{`table "objs"`}},
		{"through a WriteTxn of another table", func() error {
			wtxn := db.WriteTxn(keyless)
			defer wtxn.Abort()
			_, _, err := tbl.Modify(wtxn, &testObject{ID: 1}, keep)
			return err
		}, ErrTableNotLockedForWriting, []string{`table "objs"`}},
		{"without a primary key", func() error {
			wtxn := db.WriteTxn(keyless)
			defer wtxn.Abort()
			_, _, err := keyless.Modify(wtxn, &testObject{ID: 1}, keep)
			return err
		}, ErrPrimaryKey, []string{`table "keyless"`}},
		{"when merge changes the primary key", func() error {
			wtxn := db.WriteTxn(tbl)
			defer wtxn.Abort()
			_, _, err := tbl.Modify(wtxn, &testObject{ID: 1, Name: "one"}, func(old, new *testObject) *testObject {
				return &testObject{ID: 3, Name: "three"}
			})
			return err
		}, ErrPrimaryKey, []string{`table "objs"`, "merge"}},
		{"when the merged object breaks a unique index", func() error {
			wtxn := db.WriteTxn(tbl)
			defer wtxn.Abort()
			_, _, err := tbl.Modify(wtxn, &testObject{ID: 1, Name: "two"}, keep)
			if n := tbl.NumObjects(wtxn); n != 2 {
				return fmt.Errorf("%d objects after the failed Modify", n)
			}
			if o, _, _ := tbl.Get(wtxn, idIndex.Query(1)); o.Name != "one" {
				return fmt.Errorf("object 1 became %+v", o)
			}
			return err
		}, ErrUniqueConstraint, []string{`table "objs"`, `index "name"`}},
	} {
		t.Run(tc.what, func(t *testing.T) {
			rev := tbl.Revision(db.ReadTxn())
			err := tc.modify()
			if !errors.Is(err, tc.sentinel) {
				t.Fatalf("error %v, want one wrapping %v", err, tc.sentinel)
			}
			for _, n := range tc.names {
				if !strings.Contains(err.Error(), n) {
					t.Errorf("error %q does not name %s", err, n)
				}
			}
			if got := tbl.Revision(db.ReadTxn()); got != rev {
				t.Errorf("revision %d after the failed Modify, want %d", got, rev)
			}
		})
	}
}

// TestModifyReturningStored: a merge that returns the stored object
// itself breaks immutability (it may have changed it in place), so Modify
// panics as Insert of the stored object does, saying how to fix it.
func TestModifyReturningStored(t *testing.T) {
	db, tbl := newTestTable(t, "objs")
	wtxn := db.WriteTxn(tbl)
	defer wtxn.Abort()
	tbl.Insert(wtxn, &testObject{ID: 1})
	defer func() {
		msg := fmt.Sprint(recover())
		if !strings.Contains(msg, "merge returned the stored object") || !strings.Contains(msg, "clone") {
			t.Fatalf("recovered %q, want a panic about merge returning the stored object", msg)
		}
	}()
	tbl.Modify(wtxn, &testObject{ID: 1}, func(old, _ *testObject) *testObject { return old })
}
