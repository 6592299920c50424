package statedb

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRevisionIndexInLargeTxn: a transaction of several times revBatch
// writes (new keys, keys written again, keys deleted, some of them written
// earlier in the same transaction), read through the WriteTxn now and then
// and then committed, has exactly the live objects in its revision index,
// in revision order, as a map of key to last write says, inside the
// transaction and after the commit.
func TestRevisionIndexInLargeTxn(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	db := New()
	tbl, err := NewTable(db, "objs", idIndex)
	if err != nil {
		t.Fatal(err)
	}
	type entry struct {
		obj *testObject
		rev Revision
	}
	model := map[uint64]entry{}
	check := func(txn ReadTxn, where string) {
		t.Helper()
		var want []entry
		for _, e := range model {
			want = append(want, e)
		}
		slices.SortFunc(want, func(a, b entry) int { return int(a.rev) - int(b.rev) })
		var got []entry
		for o, rev := range tbl.LowerBound(txn, ByRevision[*testObject](0)) {
			got = append(got, entry{o, rev})
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: the revision index holds %d entries, want %d (or other ones)", where, len(got), len(want))
		}
	}
	for range 3 {
		wtxn := db.WriteTxn(tbl)
		for i := range 4 * revBatch {
			id := uint64(rng.IntN(3 * revBatch))
			if rng.IntN(5) == 0 {
				if _, had, _ := tbl.Delete(wtxn, &testObject{ID: id}); had != (model[id].obj != nil) {
					t.Fatalf("Delete(%d) found %v", id, had)
				}
				delete(model, id)
			} else {
				o := &testObject{ID: id}
				if _, _, err := tbl.Insert(wtxn, o); err != nil {
					t.Fatal(err)
				}
				model[id] = entry{o, tbl.Revision(wtxn)}
			}
			if i%2500 == 0 { // and between reads, more than revBatch writes
				check(wtxn, "in the WriteTxn")
			}
		}
		check(wtxn, "before Commit")
		check(wtxn.Commit(), "after Commit")
		check(db.ReadTxn(), "in a new ReadTxn")
	}
}
