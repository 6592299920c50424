package statedb

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/steadystate/steadystate/index"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testObject is the object of the tests' tables.
type testObject struct {
	ID   uint64
	Tags []string
	Name string
}

func (o *testObject) clone() *testObject { c := *o; return &c }

var (
	idIndex = Index[*testObject, uint64]{
		Name:       "id",
		FromObject: func(o *testObject) index.KeySet { return index.NewKeySet(index.Uint64(o.ID)) },
		FromKey:    index.Uint64,
		Unique:     true,
	}
	tagIndex = Index[*testObject, string]{
		Name: "tags",
		FromObject: func(o *testObject) index.KeySet {
			keys := make([]index.Key, len(o.Tags))
			for i, t := range o.Tags {
				keys[i] = index.String(t)
			}
			return index.NewKeySet(keys...)
		},
		FromKey: index.String,
	}
	nameIndex = Index[*testObject, string]{
		Name:       "name",
		FromObject: func(o *testObject) index.KeySet { return index.NewKeySet(index.String(o.Name)) },
		FromKey:    index.String,
		Unique:     true,
	}
)

func newTestTable(t testing.TB, name string, secondary ...Indexer[*testObject]) (*DB, RWTable[*testObject]) {
	t.Helper()
	db := New()
	tbl, err := NewTable(db, name, idIndex, secondary...)
	if err != nil {
		t.Fatal(err)
	}
	return db, tbl
}

func ids(seq func(func(*testObject, Revision) bool)) []uint64 {
	var out []uint64
	for o := range seq {
		out = append(out, o.ID)
	}
	return out
}

func TestInsertGetDelete(t *testing.T) {
	db, tbl := newTestTable(t, "objs", tagIndex, nameIndex)

	wtxn := db.WriteTxn(tbl)
	for i := uint64(1); i <= 3; i++ {
		if _, had, err := tbl.Insert(wtxn, &testObject{ID: i, Tags: []string{"all", "t" + string(rune('0'+i))}, Name: "n" + string(rune('0'+i))}); err != nil || had {
			t.Fatalf("insert %d: had=%v err=%v", i, had, err)
		}
	}
	// Reads in the WriteTxn see its own writes; a ReadTxn does not yet.
	if n := tbl.NumObjects(wtxn); n != 3 {
		t.Fatalf("NumObjects in wtxn = %d, want 3", n)
	}
	if n := tbl.NumObjects(db.ReadTxn()); n != 0 {
		t.Fatalf("NumObjects before commit = %d, want 0", n)
	}
	rtxn := wtxn.Commit()

	if got := tbl.Revision(rtxn); got != 3 {
		t.Fatalf("Revision = %d, want 3", got)
	}
	o, rev, found := tbl.Get(rtxn, idIndex.Query(2))
	if !found || o.ID != 2 || rev != 2 {
		t.Fatalf("Get(2) = %v %d %v", o, rev, found)
	}
	if got := ids(tbl.List(rtxn, tagIndex.Query("all"))); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("List(all) = %v", got)
	}
	if got := ids(tbl.List(rtxn, tagIndex.Query("t2"))); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("List(t2) = %v", got)
	}
	if got := ids(tbl.Prefix(rtxn, tagIndex.Query("t"))); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("Prefix(t) = %v", got)
	}
	if got := ids(tbl.List(rtxn, tagIndex.Query("a"))); len(got) != 0 {
		t.Fatalf("List(a) = %v, want none (a is only a prefix of all)", got)
	}
	if o, _, found := tbl.Get(rtxn, nameIndex.Query("n3")); !found || o.ID != 3 {
		t.Fatalf("Get(name n3) = %v %v", o, found)
	}
	if got := ids(tbl.LowerBound(rtxn, ByRevision[*testObject](2))); !slices.Equal(got, []uint64{2, 3}) {
		t.Fatalf("LowerBound(rev 2) = %v", got)
	}

	// Replace object 2 without tag "all": its stale index entry goes.
	wtxn = db.WriteTxn(tbl)
	_, had, err := tbl.Insert(wtxn, &testObject{ID: 2, Tags: []string{"other"}, Name: "n2"})
	if err != nil || !had {
		t.Fatalf("replace: had=%v err=%v", had, err)
	}
	if _, had, err := tbl.Delete(wtxn, &testObject{ID: 1}); err != nil || !had {
		t.Fatalf("delete: had=%v err=%v", had, err)
	}
	rtxn = wtxn.Commit()
	if got := ids(tbl.List(rtxn, tagIndex.Query("all"))); !slices.Equal(got, []uint64{3}) {
		t.Fatalf("List(all) after replace/delete = %v", got)
	}
	if got := ids(tbl.All(rtxn)); !slices.Equal(got, []uint64{2, 3}) {
		t.Fatalf("All = %v", got)
	}
	if got := tbl.Revision(rtxn); got != 5 {
		t.Fatalf("Revision = %d, want 5 (3 inserts, 1 replace, 1 delete)", got)
	}
	if _, _, found := tbl.Get(rtxn, nameIndex.Query("n1")); found {
		t.Fatal("deleted object still in unique secondary index")
	}
}

func TestErrors(t *testing.T) {
	db, tbl := newTestTable(t, "objs", nameIndex)
	other, err := NewTable(db, "other", idIndex)
	if err != nil {
		t.Fatal(err)
	}
	wtxn := db.WriteTxn(tbl)
	if _, _, err := other.Insert(wtxn, &testObject{ID: 1}); !errors.Is(err, ErrTableNotLockedForWriting) || !strings.Contains(err.Error(), `"other"`) {
		t.Fatalf("insert into unlocked table: %v", err)
	}
	if _, _, err := tbl.Insert(wtxn, &testObject{ID: 1, Name: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tbl.Insert(wtxn, &testObject{ID: 2, Name: "a"}); !errors.Is(err, ErrUniqueConstraint) {
		t.Fatalf("unique violation: %v", err)
	}
	if _, _, err := tbl.CompareAndSwap(wtxn, 99, &testObject{ID: 1, Name: "a"}); !errors.Is(err, ErrRevisionNotEqual) {
		t.Fatalf("CAS wrong revision: %v", err)
	}
	if _, _, err := tbl.CompareAndSwap(wtxn, 1, &testObject{ID: 7}); !errors.Is(err, ErrObjectNotFound) {
		t.Fatalf("CAS missing: %v", err)
	}
	if _, _, err := tbl.CompareAndDelete(wtxn, 5, &testObject{ID: 1}); !errors.Is(err, ErrRevisionNotEqual) {
		t.Fatalf("CAD wrong revision: %v", err)
	}
	wtxn.Commit()
	wtxn.Abort() // no-op after Commit
	if _, _, err := tbl.Insert(wtxn, &testObject{ID: 3}); !errors.Is(err, ErrTransactionClosed) {
		t.Fatalf("insert after commit: %v", err)
	}
	if o, _, found := tbl.Get(db.ReadTxn(), idIndex.Query(1)); !found || o.Name != "a" {
		t.Fatalf("object 1 = %v %v", o, found)
	}
}
