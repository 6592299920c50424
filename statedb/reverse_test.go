package statedb

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// keyPair is one entry of an index in the model: key, then object.
type keyPair struct {
	key string
	obj *testObject
	rev Revision
}

func pairsString(ps []keyPair) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "%q:%d@%d ", p.key, p.obj.ID, p.rev)
	}
	return strings.TrimSpace(b.String())
}

func seqPairs(seq func(func(*testObject, Revision) bool)) []keyPair {
	var out []keyPair
	for o, rev := range seq {
		out = append(out, keyPair{obj: o, rev: rev})
	}
	return out
}

func samePairs(got, want []keyPair) bool {
	return slices.EqualFunc(got, want, func(a, b keyPair) bool { return a.obj == b.obj && a.rev == b.rev })
}

// reverseKey draws keys over an alphabet of the bytes that the non-unique
// key encoding escapes (0x00) or uses in its escape (0x01), so that keys
// are prefixes of each other and tie with escape sequences.
func reverseKey(r *rand.Rand) string {
	b := make([]byte, r.IntN(4))
	for i := range b {
		b[i] = "\x00\x01a\xff"[r.IntN(4)]
	}
	return string(b)
}

// sortedPairs returns the model's entries of an index in index order: the
// key, then the primary key (IDs are encoded big-endian).
func sortedPairs(m tableModel, keys func(o *testObject) []string) []keyPair {
	var out []keyPair
	for _, e := range m.objs {
		seen := map[string]bool{}
		for _, k := range keys(e.obj) {
			if !seen[k] {
				seen[k] = true
				out = append(out, keyPair{k, e.obj, e.rev})
			}
		}
	}
	slices.SortFunc(out, func(a, b keyPair) int { return cmp.Or(strings.Compare(a.key, b.key), cmp.Compare(a.obj.ID, b.obj.ID)) })
	return out
}

// checkReverse compares ReverseLowerBound and Last (and their watch twins'
// results) with the sorted model for random keys, on the unique name
// index, the non-unique tags index, the primary and the revision index.
func checkReverse(t *testing.T, r *rand.Rand, txn ReadTxn, tbl Table[*testObject], m tableModel, where string) {
	t.Helper()
	type indexCase struct {
		name  string
		pairs []keyPair
		query func(k string) Query[*testObject]
		all   Query[*testObject]
		key   func() string
	}
	names := sortedPairs(m, func(o *testObject) []string { return []string{o.Name} })
	tags := sortedPairs(m, func(o *testObject) []string { return o.Tags })
	byID := sortedPairs(m, func(o *testObject) []string { return []string{string(idKey(o.ID))} })
	byRev := m.sorted(byRev)
	cases := []indexCase{
		{"name", names, func(k string) Query[*testObject] { return nameIndex.Query(k) }, nameIndex.QueryAll(), func() string { return reverseKey(r) }},
		{"tags", tags, func(k string) Query[*testObject] { return tagIndex.Query(k) }, tagIndex.QueryAll(), func() string { return reverseKey(r) }},
		{"id", byID, func(k string) Query[*testObject] { return Query[*testObject]{index: "id", key: []byte(k)} }, idIndex.QueryAll(),
			func() string { return string(idKey(uint64(r.IntN(modelIDs + 2)))) }},
	}
	for _, c := range cases {
		fail := func(what, k string, got, want []keyPair) {
			t.Helper()
			t.Fatalf("%s: index %s: %s %q:\n got %s\nwant %s", where, c.name, what, k, pairsString(got), pairsString(want))
		}
		checkLast := func(what, k string, q Query[*testObject], under []keyPair) {
			t.Helper()
			o, rev, found := tbl.Last(txn, q)
			o2, rev2, _, found2 := tbl.LastWatch(txn, q)
			if o2 != o || rev2 != rev || found2 != found {
				t.Fatalf("%s: index %s: LastWatch %q disagrees with Last", where, c.name, k)
			}
			if found != (len(under) > 0) || found && (o != under[len(under)-1].obj || rev != under[len(under)-1].rev) {
				fail(fmt.Sprintf("%s = %v@%d %v", what, o, rev, found), k, nil, under)
			}
		}
		checkLast("Last(QueryAll)", "", c.all, c.pairs)
		for range 12 {
			k := c.key()
			var below, under []keyPair
			for _, p := range c.pairs {
				if p.key <= k {
					below = append(below, p)
				}
				if strings.HasPrefix(p.key, k) {
					under = append(under, p)
				}
			}
			slices.Reverse(below)
			if got := seqPairs(tbl.ReverseLowerBound(txn, c.query(k))); !samePairs(got, below) {
				fail("ReverseLowerBound", k, got, below)
			}
			seq, _ := tbl.ReverseLowerBoundWatch(txn, c.query(k))
			if got := seqPairs(seq); !samePairs(got, below) {
				fail("ReverseLowerBoundWatch", k, got, below)
			}
			checkLast("Last", k, c.query(k), under)
		}
	}
	for range 4 {
		rev := Revision(r.IntN(int(m.rev) + 2))
		var want []keyPair
		for _, e := range byRev {
			if e.rev <= rev {
				want = append(want, keyPair{obj: e.obj, rev: e.rev})
			}
		}
		slices.Reverse(want)
		if got := seqPairs(tbl.ReverseLowerBound(txn, ByRevision[*testObject](rev))); !samePairs(got, want) {
			t.Fatalf("%s: ReverseLowerBound(ByRevision(%d)):\n got %s\nwant %s", where, rev, pairsString(got), pairsString(want))
		}
	}
}

func idKey(id uint64) []byte { return idIndex.FromKey(id) }

// TestReverseModel runs random writes on a table with a unique and a
// non-unique secondary index whose keys hold the escape bytes, and checks
// the reverse reads against a sorted slice after every transaction and
// inside it.
func TestReverseModel(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t), 17))
	db, tbl := newTestTable(t, "objs", tagIndex, nameIndex)
	m := newTableModel()
	for round := range envInt(t, "REVERSE_MODEL_ROUNDS", 150) {
		wtxn := db.WriteTxn(tbl)
		next := m.clone()
		for range r.IntN(10) + 1 {
			id := uint64(r.IntN(modelIDs))
			switch op := r.IntN(10); {
			case op < 6:
				o := &testObject{ID: id, Name: reverseKey(r)}
				for range r.IntN(4) {
					o.Tags = append(o.Tags, reverseKey(r))
				}
				_, _, err := tbl.Insert(wtxn, o)
				if holder, held := next.nameHolder(o.Name); held && holder != id {
					if !errors.Is(err, ErrUniqueConstraint) {
						t.Fatalf("round %d: Insert of a held name: %v", round, err)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				next.put(o)
			case op < 9:
				if _, had, _ := tbl.Delete(wtxn, &testObject{ID: id}); had {
					next.del(id)
				}
			default:
				checkReverse(t, r, wtxn, tbl, next, fmt.Sprintf("round %d (in the WriteTxn)", round))
			}
		}
		if r.IntN(8) == 0 {
			wtxn.Abort()
		} else {
			wtxn.Commit()
			m = next
		}
		checkReverse(t, r, db.ReadTxn(), tbl, m, fmt.Sprintf("round %d", round))
	}
}

// TestReverseWatch: LastWatch closes when the last object under its key
// changes, ReverseLowerBoundWatch on any change to the table; a write
// elsewhere leaves LastWatch open.
func TestReverseWatch(t *testing.T) {
	db, tbl := newTestTable(t, "objs", tagIndex, nameIndex)
	insert := func(objs ...*testObject) {
		t.Helper()
		wtxn := db.WriteTxn(tbl)
		for _, o := range objs {
			if _, _, err := tbl.Insert(wtxn, o); err != nil {
				t.Fatal(err)
			}
		}
		wtxn.Commit()
	}
	insert(&testObject{ID: 1, Name: "a1", Tags: []string{"x\x00"}}, &testObject{ID: 2, Name: "b1", Tags: []string{"x"}})
	isClosed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	txn := db.ReadTxn()
	o, _, lastA, _ := tbl.LastWatch(txn, nameIndex.Query("a"))
	if o.ID != 1 {
		t.Fatalf("Last(a) = %d", o.ID)
	}
	o, _, lastTagX, _ := tbl.LastWatch(txn, tagIndex.Query("x"))
	if o.ID != 1 { // "x\x00" sorts after "x"
		t.Fatalf("Last(tags x) = %d", o.ID)
	}
	_, rlb := tbl.ReverseLowerBoundWatch(txn, nameIndex.Query("zz"))

	insert(&testObject{ID: 3, Name: "c1"})
	if isClosed(lastA) || isClosed(lastTagX) {
		t.Fatal("a write under another prefix closed LastWatch")
	}
	if !isClosed(rlb) {
		t.Fatal("ReverseLowerBoundWatch is open after a write to the table")
	}
	insert(&testObject{ID: 4, Name: "a2"})
	if !isClosed(lastA) {
		t.Fatal("LastWatch(a) is open after a2 was inserted")
	}
	insert(&testObject{ID: 5, Name: "e", Tags: []string{"x\x00\x01"}})
	if !isClosed(lastTagX) {
		t.Fatal("LastWatch(tags x) is open after a new last tag under x")
	}
	// A table not in the snapshot: nothing, and closed channels.
	db2 := New()
	old := db2.ReadTxn()
	tbl2, err := NewTable(db2, "late", idIndex)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ch, found := tbl2.LastWatch(old, idIndex.QueryAll()); found || !isClosed(ch) {
		t.Fatal("LastWatch on a table not in the snapshot found something or is open")
	}
	seq, ch := tbl2.ReverseLowerBoundWatch(old, idIndex.Query(1))
	if len(seqPairs(seq)) != 0 || !isClosed(ch) {
		t.Fatal("ReverseLowerBoundWatch on a table not in the snapshot found something or is open")
	}
}
