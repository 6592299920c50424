package statedb

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/steadystate/steadystate/index"
)

// lpmObject is the object of the LPM tests: any number of prefixes.
type lpmObject struct {
	ID       uint64
	Prefixes []netip.Prefix
}

var (
	lpmIDIndex = Index[*lpmObject, uint64]{
		Name:       "id",
		FromObject: func(o *lpmObject) index.KeySet { return index.NewKeySet(index.Uint64(o.ID)) },
		FromKey:    index.Uint64,
		Unique:     true,
	}
	lpmMulti = LPMIndex[*lpmObject]{
		Name:       "prefixes",
		FromObject: func(o *lpmObject) []netip.Prefix { return o.Prefixes },
	}
	lpmUnique = LPMIndex[*lpmObject]{
		Name:       "prefix",
		FromObject: func(o *lpmObject) []netip.Prefix { return o.Prefixes },
		Unique:     true,
	}
	// lpmOne and lpmOneUnique index an object's first prefix through
	// Prefix (the objects of their tables have at most one).
	lpmOne       = LPMIndex[*lpmObject]{Name: "first", Prefix: firstPrefix}
	lpmOneUnique = LPMIndex[*lpmObject]{Name: "first", Prefix: firstPrefix, Unique: true}
)

func firstPrefix(o *lpmObject) netip.Prefix {
	if len(o.Prefixes) == 0 {
		return netip.Prefix{}
	}
	return o.Prefixes[0]
}

func newLPMTable(t testing.TB, db *DB, name string, idx LPMIndex[*lpmObject]) RWTable[*lpmObject] {
	t.Helper()
	tbl, err := NewTable(db, name, lpmIDIndex, idx)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func addr(s string) netip.Addr  { return netip.MustParseAddr(s) }

// TestLPMRoutes is the story of the index: routes, a lookup by address,
// every match, IPv4 and IPv6 apart.
func TestLPMRoutes(t *testing.T) {
	db := New()
	routes := newLPMTable(t, db, "routes", lpmMulti)
	wtxn := db.WriteTxn(routes)
	for i, ps := range [][]string{
		{"0.0.0.0/0"}, {"10.0.0.0/8"}, {"10.1.0.0/16", "192.168.0.0/16"}, {"10.1.2.0/24"},
		{"10.1.2.0/24"}, {"::/0"}, {"::ffff:10.0.0.0/104"}, {"10.1.2.3/8"}, // masked: 10.0.0.0/8
	} {
		o := &lpmObject{ID: uint64(i)}
		for _, p := range ps {
			o.Prefixes = append(o.Prefixes, pfx(p))
		}
		if _, _, err := routes.Insert(wtxn, o); err != nil {
			t.Fatal(err)
		}
	}
	txn := wtxn.Commit()
	tests := []struct {
		query   Query[*lpmObject]
		get     uint64 // ID of Get's object; ^0: none
		list    []uint64
		matches []uint64
	}{
		{lpmMulti.Query(addr("10.1.2.3")), 3, []uint64{3, 4}, []uint64{3, 4, 2, 1, 7, 0}},
		{lpmMulti.Query(addr("10.1.3.1")), 2, []uint64{2}, []uint64{2, 1, 7, 0}},
		{lpmMulti.Query(addr("10.200.0.1")), 1, []uint64{1, 7}, []uint64{1, 7, 0}},
		{lpmMulti.Query(addr("192.168.7.7")), 2, []uint64{2}, []uint64{2, 0}},
		{lpmMulti.Query(addr("11.0.0.1")), 0, []uint64{0}, []uint64{0}},
		{lpmMulti.QueryPrefix(pfx("10.1.0.0/20")), 2, []uint64{2}, []uint64{2, 1, 7, 0}},
		{lpmMulti.QueryPrefix(pfx("10.1.2.0/24")), 3, []uint64{3, 4}, []uint64{3, 4, 2, 1, 7, 0}},
		{lpmMulti.QueryPrefix(pfx("10.0.0.0/7")), 0, []uint64{0}, []uint64{0}},
		// IPv4-mapped IPv6 is IPv6: it finds the mapped prefix, never 10/8.
		{lpmMulti.Query(addr("::ffff:10.1.2.3")), 6, []uint64{6}, []uint64{6, 5}},
		{lpmMulti.Query(addr("2001:db8::1")), 5, []uint64{5}, []uint64{5}},
		{lpmMulti.Query(netip.Addr{}), ^uint64(0), nil, nil},
		{lpmMulti.QueryPrefix(netip.Prefix{}), ^uint64(0), nil, nil},
		{lpmMulti.QueryAll(), ^uint64(0), nil, nil},
	}
	for _, tc := range tests {
		name := fmt.Sprintf("%q", tc.query.Key())
		o, _, found := routes.Get(txn, tc.query)
		if got := map[bool]uint64{true: o.idOrZero(), false: ^uint64(0)}[found]; got != tc.get {
			t.Errorf("%s: Get = %d, want %d", name, got, tc.get)
		}
		if got := lpmIDs(routes.List(txn, tc.query)); !slices.Equal(got, tc.list) {
			t.Errorf("%s: List = %v, want %v", name, got, tc.list)
		}
		if got := lpmIDs(routes.Matches(txn, tc.query)); !slices.Equal(got, tc.matches) {
			t.Errorf("%s: Matches = %v, want %v", name, got, tc.matches)
		}
	}
	// Prefix: the prefixes within; index order is address, then length.
	if got := lpmIDs(routes.Prefix(txn, lpmMulti.QueryPrefix(pfx("10.0.0.0/8")))); !slices.Equal(got, []uint64{1, 7, 2, 3, 4}) {
		t.Errorf("Prefix(10.0.0.0/8) = %v", got)
	}
	if got := lpmIDs(routes.Prefix(txn, lpmMulti.QueryAll())); !slices.Equal(got, []uint64{0, 1, 7, 2, 3, 4, 2, 5, 6}) {
		t.Errorf("Prefix(QueryAll) = %v", got)
	}
	if o, _, ok := routes.Last(txn, lpmMulti.QueryPrefix(pfx("10.0.0.0/8"))); !ok || o.ID != 4 {
		t.Errorf("Last(10.0.0.0/8) = %v, %v", o, ok)
	}
	// An invalid query finds nothing, and sorts before every prefix.
	invalid := lpmMulti.Query(netip.Addr{})
	if got := lpmIDs(routes.Prefix(txn, invalid)); got != nil {
		t.Errorf("Prefix(invalid) = %v", got)
	}
	if _, _, ok := routes.Last(txn, invalid); ok {
		t.Error("Last(invalid) found something")
	}
	if got, all := lpmIDs(routes.LowerBound(txn, invalid)), lpmIDs(routes.Prefix(txn, lpmMulti.QueryAll())); !slices.Equal(got, all) {
		t.Errorf("LowerBound(invalid) = %v, want everything: %v", got, all)
	}
	if got := lpmIDs(routes.ReverseLowerBound(txn, invalid)); got != nil {
		t.Errorf("ReverseLowerBound(invalid) = %v", got)
	}
}

func (o *lpmObject) idOrZero() uint64 {
	if o == nil {
		return 0
	}
	return o.ID
}

func lpmIDs(seq func(func(*lpmObject, Revision) bool)) []uint64 {
	var out []uint64
	for o := range seq {
		out = append(out, o.ID)
	}
	return out
}

// lpmEntry is one (prefix, object) pair of the model.
type lpmEntry struct {
	p   netip.Prefix
	obj *lpmObject
	rev Revision
}

// lpmModel is the expected content of an LPM table: objects by ID.
type lpmModel map[uint64]lpmEntry

// entries returns every (masked prefix, object) pair once, in index
// order: family, address, length, then ID.
func (m lpmModel) entries() []lpmEntry {
	var out []lpmEntry
	for _, e := range m {
		seen := map[netip.Prefix]bool{}
		for _, p := range e.obj.Prefixes {
			if !p.IsValid() || seen[p.Masked()] {
				continue
			}
			seen[p.Masked()] = true
			out = append(out, lpmEntry{p: p.Masked(), obj: e.obj, rev: e.rev})
		}
	}
	slices.SortFunc(out, func(a, b lpmEntry) int {
		return cmp.Or(comparePrefixes(a.p, b.p), cmp.Compare(a.obj.ID, b.obj.ID))
	})
	return out
}

// comparePrefixes is the documented index order: IPv4 before IPv6, then
// address, then length.
func comparePrefixes(a, b netip.Prefix) int {
	return cmp.Or(cmp.Compare(a.Addr().BitLen(), b.Addr().BitLen()), a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
}

// contains tells whether stored prefix p contains the query prefix q.
func contains(p, q netip.Prefix) bool {
	return q.IsValid() && p.Addr().Is4() == q.Addr().Is4() && p.Bits() <= q.Bits() && p.Contains(q.Addr())
}

// expectMatches returns the entries whose prefix contains q, longest
// prefix first, then by ID.
func expectMatches(all []lpmEntry, q netip.Prefix) []lpmEntry {
	var out []lpmEntry
	for _, e := range all {
		if contains(e.p, q) {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b lpmEntry) int { return cmp.Compare(b.p.Bits(), a.p.Bits()) })
	return out
}

func entryPairs(es []lpmEntry) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "%s:%d@%d ", e.p, e.obj.ID, e.rev)
	}
	return strings.TrimSpace(b.String())
}

func seqEntries(seq func(func(*lpmObject, Revision) bool)) []lpmEntry {
	var out []lpmEntry
	for o, rev := range seq {
		out = append(out, lpmEntry{obj: o, rev: rev})
	}
	return out
}

// sameObjects compares by object identity and revision, not prefix.
func sameObjects(got, want []lpmEntry) bool {
	return slices.EqualFunc(got, want, func(a, b lpmEntry) bool { return a.obj == b.obj && a.rev == b.rev })
}

// lpmGen draws prefixes and queries that nest often: around a few base
// addresses of both families (IPv4-mapped IPv6 among them), every length,
// with a few bits flipped.
type lpmGen struct{ r *rand.Rand }

var lpmBases = []netip.Addr{
	addr("10.1.2.3"), addr("10.1.130.7"), addr("192.168.0.1"), addr("0.0.0.0"), addr("255.255.255.255"),
	addr("2001:db8::1"), addr("::ffff:10.1.2.3"), addr("fe80::1:2"),
}

func (g lpmGen) addr() netip.Addr {
	a := lpmBases[g.r.IntN(len(lpmBases))]
	b := a.AsSlice()
	for range g.r.IntN(3) {
		i := g.r.IntN(len(b) * 8)
		b[i/8] ^= 0x80 >> (i % 8)
	}
	out, _ := netip.AddrFromSlice(b)
	return out
}

func (g lpmGen) prefix() netip.Prefix {
	a := g.addr()
	return netip.PrefixFrom(a, g.r.IntN(a.BitLen()+1))
}

func (g lpmGen) object(id uint64) *lpmObject {
	o := &lpmObject{ID: id}
	for range g.r.IntN(4) {
		if g.r.IntN(20) == 0 {
			o.Prefixes = append(o.Prefixes, netip.Prefix{}) // not indexed
			continue
		}
		o.Prefixes = append(o.Prefixes, g.prefix())
	}
	return o
}

// checkLPM compares every read of an LPM index with a scan of the model,
// for random queries.
func checkLPM(t *testing.T, g lpmGen, txn ReadTxn, tbl Table[*lpmObject], idx LPMIndex[*lpmObject], m lpmModel, where string) {
	t.Helper()
	all := m.entries()
	fail := func(what string, q netip.Prefix, got, want []lpmEntry) {
		t.Helper()
		t.Fatalf("%s: table %s: %s %s:\n got %s\nwant %s", where, tbl.Name(), what, q, entryPairs(got), entryPairs(want))
	}
	if got, want := seqEntries(tbl.Prefix(txn, idx.QueryAll())), all; !sameObjects(got, want) {
		fail("Prefix(QueryAll)", netip.Prefix{}, got, want)
	}
	for i := range 30 {
		var q netip.Prefix
		var query Query[*lpmObject]
		switch i % 3 {
		case 0:
			a := g.addr()
			q, query = netip.PrefixFrom(a, a.BitLen()), idx.Query(a)
		case 1:
			q = g.prefix()
			query = idx.QueryPrefix(q)
			q = q.Masked()
		default:
			// A stored prefix, so that exact hits are common.
			if len(all) == 0 {
				continue
			}
			q = all[g.r.IntN(len(all))].p
			query = idx.QueryPrefix(q)
		}
		matches := expectMatches(all, q)
		var longest []lpmEntry
		for _, e := range matches {
			if e.p.Bits() == matches[0].p.Bits() {
				longest = append(longest, e)
			}
		}
		if got := seqEntries(tbl.Matches(txn, query)); !sameObjects(got, matches) {
			fail("Matches", q, got, matches)
		}
		if got := seqEntries(tbl.List(txn, query)); !sameObjects(got, longest) {
			fail("List", q, got, longest)
		}
		o, rev, found := tbl.Get(txn, query)
		if found != (len(longest) > 0) || found && (o != longest[0].obj || rev != longest[0].rev) {
			fail(fmt.Sprintf("Get = %v@%d %v", o, rev, found), q, nil, longest)
		}
		o2, rev2, _, found2 := tbl.GetWatch(txn, query)
		if o2 != o || rev2 != rev || found2 != found {
			t.Fatalf("%s: GetWatch %s disagrees with Get", where, q)
		}
		seq, _ := tbl.ListWatch(txn, query)
		if got := seqEntries(seq); !sameObjects(got, longest) {
			fail("ListWatch", q, got, longest)
		}
		seq, _ = tbl.MatchesWatch(txn, query)
		if got := seqEntries(seq); !sameObjects(got, matches) {
			fail("MatchesWatch", q, got, matches)
		}
		// Index order: Prefix (within q), LowerBound, ReverseLowerBound,
		// Last.
		var within, lower, upper []lpmEntry
		for _, e := range all {
			if e.p.Addr().Is4() == q.Addr().Is4() && e.p.Bits() >= q.Bits() && q.Contains(e.p.Addr()) {
				within = append(within, e)
			}
			if comparePrefixes(e.p, q) >= 0 {
				lower = append(lower, e)
			} else {
				upper = append(upper, e)
			}
		}
		for _, e := range lower {
			if comparePrefixes(e.p, q) == 0 {
				upper = append(upper, e)
			}
		}
		slices.Reverse(upper)
		if got := seqEntries(tbl.Prefix(txn, query)); !sameObjects(got, within) {
			fail("Prefix", q, got, within)
		}
		if got := seqEntries(tbl.LowerBound(txn, query)); !sameObjects(got, lower) {
			fail("LowerBound", q, got, lower)
		}
		if got := seqEntries(tbl.ReverseLowerBound(txn, query)); !sameObjects(got, upper) {
			fail("ReverseLowerBound", q, got, upper)
		}
		o, rev, found = tbl.Last(txn, query)
		if found != (len(within) > 0) || found && (o != within[len(within)-1].obj || rev != within[len(within)-1].rev) {
			fail(fmt.Sprintf("Last = %v@%d %v", o, rev, found), q, nil, within)
		}
	}
}

// TestLPMModel runs random inserts, deletes, aborts and commits against
// four LPM tables (a non-unique index of several prefixes per object, a
// unique one, and both again of one prefix per object through Prefix,
// whose writes build keys in the transaction's buffers) and compares every
// read with a brute-force scan, in the committed snapshots and inside the
// write transactions. An insert writes a new object, or one with the
// prefixes its ID has (a status written: the key stays).
func TestLPMModel(t *testing.T) { forEachReplay(t, testLPMModel) }

func testLPMModel(t *testing.T) {
	seed := testSeed(t)
	g := lpmGen{rand.New(rand.NewPCG(seed, 15))}
	db := New()
	tables := []struct {
		tbl RWTable[*lpmObject]
		idx LPMIndex[*lpmObject]
		m   lpmModel
	}{
		{newLPMTable(t, db, "multi", lpmMulti), lpmMulti, lpmModel{}},
		{newLPMTable(t, db, "unique", lpmUnique), lpmUnique, lpmModel{}},
		{newLPMTable(t, db, "one", lpmOne), lpmOne, lpmModel{}},
		{newLPMTable(t, db, "oneunique", lpmOneUnique), lpmOneUnique, lpmModel{}},
	}
	rounds := envInt(t, "LPM_MODEL_ROUNDS", 300)
	var revs [4]Revision
	for round := range rounds {
		ti := round % len(tables)
		tt := &tables[ti]
		wtxn := db.WriteTxn(tt.tbl)
		m := lpmModel{}
		for k, v := range tt.m {
			m[k] = v
		}
		rev := revs[ti]
		for range g.r.IntN(12) + 1 {
			id := uint64(g.r.IntN(30))
			switch op := g.r.IntN(10); {
			case op < 6:
				o := g.object(id)
				if cur := m[id].obj; cur != nil && g.r.IntN(3) == 0 {
					o.Prefixes = slices.Clone(cur.Prefixes) // the same keys
				}
				if tt.idx.Prefix != nil {
					o.Prefixes = o.Prefixes[:min(1, len(o.Prefixes))]
				}
				_, _, err := tt.tbl.Insert(wtxn, o)
				conflict := false
				if tt.idx.Unique {
					for _, e := range m.entries() {
						for _, p := range o.Prefixes {
							if p.IsValid() && e.p == p.Masked() && e.obj.ID != id {
								conflict = true
							}
						}
					}
				}
				if conflict {
					if !errors.Is(err, ErrUniqueConstraint) {
						t.Fatalf("round %d: Insert %d %v: err %v, want ErrUniqueConstraint", round, id, o.Prefixes, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("round %d: Insert: %v", round, err)
				}
				rev++
				m[id] = lpmEntry{obj: o, rev: rev}
			case op < 9:
				_, had, err := tt.tbl.Delete(wtxn, &lpmObject{ID: id})
				if err != nil || had != (m[id].obj != nil) {
					t.Fatalf("round %d: Delete %d: had %v err %v", round, id, had, err)
				}
				if had {
					rev++
					delete(m, id)
				}
			default:
				checkLPM(t, g, wtxn, tt.tbl, tt.idx, m, fmt.Sprintf("round %d (in the WriteTxn)", round))
			}
		}
		if g.r.IntN(8) == 0 {
			wtxn.Abort()
		} else {
			wtxn.Commit()
			tt.m, revs[ti] = m, rev
		}
		checkLPM(t, g, db.ReadTxn(), tt.tbl, tt.idx, tt.m, fmt.Sprintf("round %d", round))
	}
}

// TestLPMWatch checks the watch channels of the LPM reads: after each
// commit, every channel whose answer changed is closed.
func TestLPMWatch(t *testing.T) {
	g := lpmGen{rand.New(rand.NewPCG(testSeed(t), 16))}
	db := New()
	tbl := newLPMTable(t, db, "routes", lpmMulti)
	type watched struct {
		what   string
		answer func(ReadTxn) string
		ch     <-chan struct{}
	}
	spurious, total := 0, 0
	for round := range 200 {
		var ws []watched
		txn := db.ReadTxn()
		for range 6 {
			a := g.addr()
			q := lpmMulti.Query(a)
			if g.r.IntN(2) == 0 {
				q = lpmMulti.QueryPrefix(g.prefix())
			}
			get := func(txn ReadTxn) string { o, rev, ok := tbl.Get(txn, q); return fmt.Sprint(o, rev, ok) }
			list := func(txn ReadTxn) string { return entryPairs(seqEntries(tbl.List(txn, q))) }
			matches := func(txn ReadTxn) string { return entryPairs(seqEntries(tbl.Matches(txn, q))) }
			_, _, ch, _ := tbl.GetWatch(txn, q)
			ws = append(ws, watched{"GetWatch " + string(q.Key()), get, ch})
			_, ch = tbl.ListWatch(txn, q)
			ws = append(ws, watched{"ListWatch " + string(q.Key()), list, ch})
			_, ch = tbl.MatchesWatch(txn, q)
			ws = append(ws, watched{"MatchesWatch " + string(q.Key()), matches, ch})
		}
		before := make([]string, len(ws))
		for i, w := range ws {
			before[i] = w.answer(txn)
		}
		wtxn := db.WriteTxn(tbl)
		for range g.r.IntN(3) + 1 {
			id := uint64(g.r.IntN(20))
			if g.r.IntN(3) == 0 {
				tbl.Delete(wtxn, &lpmObject{ID: id})
			} else if _, _, err := tbl.Insert(wtxn, g.object(id)); err != nil {
				t.Fatal(err)
			}
		}
		after := wtxn.Commit()
		for i, w := range ws {
			closed := false
			select {
			case <-w.ch:
				closed = true
			default:
			}
			changed := w.answer(after) != before[i]
			if changed && !closed {
				t.Fatalf("round %d: %s: the answer changed from %q to %q, but the channel is open", round, w.what, before[i], w.answer(after))
			}
			if closed && !changed {
				spurious++
			}
			total++
		}
	}
	t.Logf("spurious closes: %d of %d watches", spurious, total)
}

// TestLPMIndexErrors: an LPM index cannot be primary, needs FromObject
// or Prefix (not both),
// and its text keys are addresses or prefixes.
func TestLPMIndexErrors(t *testing.T) {
	db := New()
	if _, err := NewTable(db, "a", LPMIndex[*lpmObject]{Name: "p", FromObject: lpmMulti.FromObject, Unique: true}); !errors.Is(err, ErrInvalidIndex) {
		t.Errorf("LPM primary index: err %v, want ErrInvalidIndex", err)
	}
	if _, err := NewTable(db, "b", lpmIDIndex, LPMIndex[*lpmObject]{Name: "p"}); !errors.Is(err, ErrInvalidIndex) {
		t.Errorf("LPM index without FromObject: err %v, want ErrInvalidIndex", err)
	}
	if _, err := NewTable(db, "c", lpmIDIndex, LPMIndex[*lpmObject]{Name: "p", FromObject: lpmMulti.FromObject, Prefix: firstPrefix}); !errors.Is(err, ErrInvalidIndex) || !strings.Contains(err.Error(), "both") {
		t.Errorf("LPM index with FromObject and Prefix: err %v, want ErrInvalidIndex saying both", err)
	}
	for _, tc := range []struct {
		key  string
		want netip.Prefix
	}{
		{"10.1.2.3", pfx("10.1.2.3/32")},
		{"10.0.0.0/8", pfx("10.0.0.0/8")},
		{"10.1.2.3/8", pfx("10.0.0.0/8")},
		{"2001:db8::/32", pfx("2001:db8::/32")},
		{"::ffff:10.1.2.3", pfx("::ffff:10.1.2.3/128")},
		{"fe80::1%eth0", pfx("fe80::1/128")},
	} {
		q, err := lpmMulti.QueryString(tc.key)
		if err != nil {
			t.Errorf("QueryString(%q): %v", tc.key, err)
			continue
		}
		if p, ok := lpmPrefix(q.Key()); !ok || p != tc.want {
			t.Errorf("QueryString(%q) is the key of %v, want %v", tc.key, p, tc.want)
		}
	}
	for _, bad := range []string{"", "10.0.0.0/33", "10.0.0", "x", "10.0.0.0/", "/8"} {
		_, err := lpmMulti.QueryString(bad)
		if !errors.Is(err, ErrBadQuery) || !strings.Contains(err.Error(), `"prefixes"`) {
			t.Errorf("QueryString(%q): err %v, want ErrBadQuery naming the index", bad, err)
		}
	}
	_, tbl := newTestTable(t, "plain", nameIndex)
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "LPMIndex") {
				t.Errorf("Matches on a non-LPM index: recovered %v, want a panic naming LPMIndex", r)
			}
		}()
		tbl.Matches(db.ReadTxn(), nameIndex.Query("x"))
	}()
}

// TestLPMUnique: a unique LPM index rejects a prefix held by another
// object, masked prefixes included, and leaves the transaction unchanged.
func TestLPMUnique(t *testing.T) {
	db := New()
	tbl := newLPMTable(t, db, "routes", lpmUnique)
	wtxn := db.WriteTxn(tbl)
	defer wtxn.Abort()
	if _, _, err := tbl.Insert(wtxn, &lpmObject{ID: 1, Prefixes: []netip.Prefix{pfx("10.0.0.0/8")}}); err != nil {
		t.Fatal(err)
	}
	_, _, err := tbl.Insert(wtxn, &lpmObject{ID: 2, Prefixes: []netip.Prefix{pfx("192.168.0.0/16"), pfx("10.9.9.9/8")}})
	if !errors.Is(err, ErrUniqueConstraint) || !strings.Contains(err.Error(), `"routes"`) {
		t.Fatalf("Insert of a held prefix: err %v, want ErrUniqueConstraint naming the table", err)
	}
	if n := tbl.NumObjects(wtxn); n != 1 {
		t.Fatalf("a failed Insert left %d objects", n)
	}
	if _, _, ok := tbl.Get(wtxn, lpmUnique.Query(addr("192.168.1.1"))); ok {
		t.Fatal("a failed Insert left an index entry")
	}
	// The same object may keep its prefix.
	if _, _, err := tbl.Insert(wtxn, &lpmObject{ID: 1, Prefixes: []netip.Prefix{pfx("10.0.0.0/8"), pfx("11.0.0.0/8")}}); err != nil {
		t.Fatal(err)
	}
}

// TestLPMChangesAndHTTP: an LPM table's writes reach its change iterator
// and the HTTP API answers lpm, get and prefix queries on the index, with
// a 400 for lpm on another index.
func TestLPMChangesAndHTTP(t *testing.T) {
	db := New()
	tbl := newLPMTable(t, db, "routes", lpmMulti)
	wtxn := db.WriteTxn(tbl)
	it, err := tbl.Changes(wtxn)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for i, p := range []string{"10.0.0.0/8", "10.1.0.0/16", "::/0"} {
		tbl.Insert(wtxn, &lpmObject{ID: uint64(i), Prefixes: []netip.Prefix{pfx(p)}})
	}
	wtxn.Commit()
	wtxn = db.WriteTxn(tbl)
	tbl.Delete(wtxn, &lpmObject{ID: 1})
	wtxn.Commit()
	changes, _ := it.Next(db.ReadTxn())
	var got []string
	for c := range changes {
		got = append(got, fmt.Sprintf("%d:%v", c.Object.ID, c.Deleted))
	}
	if want := []string{"0:false", "2:false"}; !slices.Equal(got, want) {
		t.Fatalf("changes = %v, want %v", got, want)
	}

	at := any(tbl).(anyTable)
	for _, tc := range []struct {
		op   QueryOp
		key  string
		want string
	}{
		{QueryLPM, "10.1.2.3", "0"},
		{QueryGet, "10.1.2.3", "0"},
		{QueryList, "10.0.0.0/16", "0"},
		{QueryLPM, "2001:db8::1", "2"},
		{QueryLPM, "11.0.0.1", ""},
		{QueryPrefix, "10.0.0.0/8", "0"},
		{QueryLast, "", "2"},
		{QueryReverseLowerBound, "10.0.0.0/9", "0"},
	} {
		seq, err := at.anyQuery(db.ReadTxn(), tc.op, "prefixes", tc.key)
		if err != nil {
			t.Errorf("%s %s: %v", tc.op, tc.key, err)
			continue
		}
		var ids []string
		for o := range seq {
			ids = append(ids, fmt.Sprint(o.(*lpmObject).ID))
		}
		if got := strings.Join(ids, ","); got != tc.want {
			t.Errorf("%s %s = %q, want %q", tc.op, tc.key, got, tc.want)
		}
	}
	for _, tc := range []struct {
		op       QueryOp
		idx, key string
	}{
		{QueryLPM, "id", "1"},
		{QueryLPM, "prefixes", "10.0.0"},
		{"lpm-all", "prefixes", "10.0.0.1"},
	} {
		if _, err := at.anyQuery(db.ReadTxn(), tc.op, tc.idx, tc.key); !errors.Is(err, ErrBadQuery) {
			t.Errorf("%s on %s %q: err %v, want ErrBadQuery", tc.op, tc.idx, tc.key, err)
		}
	}
}

// FuzzLPMKey checks the key encoder against its decoder and the documented
// order, and that parsing text never panics and agrees with the encoder.
func FuzzLPMKey(f *testing.F) {
	f.Add([]byte{10, 1, 2, 3}, 8, []byte{10, 1, 2, 4}, 24, "10.0.0.0/8")
	f.Add([]byte("\x20\x01\x0d\xb8\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01"), 128, []byte{0, 0, 0, 0}, 0, "::ffff:1.2.3.4")
	f.Add([]byte{255, 255, 255, 255}, 33, []byte{}, -1, "fe80::1%eth0")
	f.Fuzz(func(t *testing.T, a []byte, abits int, b []byte, bbits int, text string) {
		pa, pb := fuzzPrefix(a, abits), fuzzPrefix(b, bbits)
		ka, kb := lpmKey(pa), lpmKey(pb)
		for _, c := range []struct {
			p netip.Prefix
			k index.Key
		}{{pa, ka}, {pb, kb}} {
			got, ok := lpmPrefix(c.k)
			if ok != c.p.IsValid() || ok && got != c.p.Masked() {
				t.Fatalf("lpmPrefix(lpmKey(%v)) = %v, %v; want %v", c.p, got, ok, c.p.Masked())
			}
			if strings.IndexByte(string(c.k), lpmSep) >= 0 {
				t.Fatalf("lpmKey(%v) = %q holds the separator", c.p, c.k)
			}
		}
		if pa.IsValid() && pb.IsValid() {
			if got, want := cmp.Compare(string(ka), string(kb)), comparePrefixes(pa.Masked(), pb.Masked()); got != want {
				t.Fatalf("order of %v and %v: keys %d, prefixes %d", pa, pb, got, want)
			}
			if strings.HasPrefix(string(kb), string(ka)) != contains(pa.Masked(), pb.Masked()) {
				t.Fatalf("%v contains %v: %v, but key prefix: %v", pa, pb, contains(pa.Masked(), pb.Masked()), !contains(pa.Masked(), pb.Masked()))
			}
		}
		k, err := parseLPMKey(text)
		if err != nil {
			return
		}
		p, ok := lpmPrefix(k)
		if !ok {
			t.Fatalf("parseLPMKey(%q) = %q, which is no key of a prefix", text, k)
		}
		want, perr := netip.ParsePrefix(text)
		if perr != nil {
			a, aerr := netip.ParseAddr(text)
			if aerr != nil {
				t.Fatalf("parseLPMKey(%q) accepted what netip rejects", text)
			}
			want = netip.PrefixFrom(a.WithZone(""), a.BitLen())
		}
		if p != want.Masked() {
			t.Fatalf("parseLPMKey(%q) is the key of %v, want %v", text, p, want.Masked())
		}
	})
}

// fuzzPrefix makes a prefix of b (4 or 16 bytes; others give the zero
// Prefix) and bits.
func fuzzPrefix(b []byte, bits int) netip.Prefix {
	a, ok := netip.AddrFromSlice(b)
	if !ok {
		return netip.Prefix{}
	}
	return netip.PrefixFrom(a, bits)
}

// A longest-prefix Get by address allocates nothing (its key is encoded on
// the reader's stack), and the address query's key is the full-length
// prefix's, zone or not.
func TestLPMGetAllocs(t *testing.T) {
	db := New()
	routes := newLPMTable(t, db, "routes", lpmUnique)
	wtxn := db.WriteTxn(routes)
	for i, p := range []string{"10.0.0.0/8", "10.1.0.0/16", "fe80::/10"} {
		if _, _, err := routes.Insert(wtxn, &lpmObject{ID: uint64(i), Prefixes: []netip.Prefix{pfx(p)}}); err != nil {
			t.Fatal(err)
		}
	}
	wtxn.Commit()
	txn := db.ReadTxn()
	for _, c := range []struct{ addr, want string }{{"10.1.2.3", "10.1.0.0/16"}, {"fe80::1%eth0", "fe80::/10"}} {
		a := addr(c.addr)
		q := lpmUnique.Query(a)
		if got, want := q.Key(), lpmUnique.QueryPrefix(netip.PrefixFrom(a.WithZone(""), a.BitLen())).Key(); !slices.Equal(got, want) {
			t.Errorf("Query(%s).Key() = %q, want %q", a, got, want)
		}
		var found bool
		var o *lpmObject
		allocs := testing.AllocsPerRun(100, func() { o, _, found = routes.Get(txn, q) })
		if !found || o.Prefixes[0] != pfx(c.want) {
			t.Errorf("Get(%s) = %v, %v, want %s", a, o, found, c.want)
		}
		if allocs != 0 && !raceEnabled {
			t.Errorf("Get(%s) allocates %v times, want 0", a, allocs)
		}
	}
}

// An object written again with its prefix (a status written) costs a
// Prefix index one allocation, its entry's new leaf, and a FromObject
// index four more (a slice of prefixes and a key, for the old object and
// the new): the Prefix index builds both keys in the transaction's
// buffers. The writes are deferred (deferred_index.go): each run replays
// its write too.
func TestLPMPrefixWriteAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocations are counted without -race")
	}
	db := New()
	plain := newLPMTable(t, db, "plain", lpmOne)
	tables := map[string]RWTable[*lpmObject]{"none": nil, "prefix": plain}
	var err error
	if tables["none"], err = NewTable(db, "none", lpmIDIndex); err != nil {
		t.Fatal(err)
	}
	if tables["fromobject"], err = NewTable(db, "fromobject", lpmIDIndex, LPMIndex[*lpmObject]{Name: "first", FromObject: func(o *lpmObject) []netip.Prefix { return []netip.Prefix{firstPrefix(o)} }}); err != nil {
		t.Fatal(err)
	}
	allocs := map[string]float64{}
	for name, tbl := range tables {
		wtxn := db.WriteTxn(tbl)
		objs := make([]*lpmObject, 102) // a warm-up run, then 100
		for i := range objs {
			objs[i] = &lpmObject{ID: 7, Prefixes: []netip.Prefix{pfx("10.1.2.0/24")}}
		}
		if _, _, err := tbl.Insert(wtxn, objs[0]); err != nil {
			t.Fatal(err)
		}
		n := 0
		allocs[name] = testing.AllocsPerRun(100, func() {
			n++
			if _, _, err := tbl.Insert(wtxn, objs[n]); err != nil {
				t.Fatal(err)
			}
			wtxn.(*writeTxn).s.flushAll()
		})
		wtxn.Abort()
	}
	t.Logf("allocations per write: %v", allocs)
	if got := allocs["prefix"] - allocs["none"]; got != 1 {
		t.Errorf("a Prefix index costs a write %v allocations (%v), want 1", got, allocs)
	}
	if got := allocs["fromobject"] - allocs["none"]; got <= 1 {
		t.Errorf("a FromObject index costs a write %v allocations (%v), want more than a Prefix index's 1", got, allocs)
	}
}
