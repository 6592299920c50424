package statedb

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/steadystate/steadystate/index"
)

// Model-based property test: random transactions against the real tables and
// against plain Go maps, compared after every operation and every commit.
//
// Sizes: STATEDB_MODEL_OPS sets the number of operations (default 4000);
// STATEDB_SEED replays a failing run (the seed is logged on failure).

// testSeed returns the seed of a randomized test and logs it if the test
// fails, so that the run can be replayed with STATEDB_SEED.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("STATEDB_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("STATEDB_SEED: %v", err)
		}
		seed = v
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("random seed: %d (replay with STATEDB_SEED=%d)", seed, seed)
		}
	})
	return seed
}

// envInt returns the integer in the environment variable name, or def.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return v
}

// graveyardLen returns the number of deleted objects kept for change
// iterators in the latest committed state of tbl.
func graveyardLen(db *DB, tbl TableMeta) int {
	return db.ReadTxn().tableEntry(tbl).graveyardLen()
}

// Pools of keys: small, so that random operations collide often. The tags
// are prefixes of each other to tell List (exact) from Prefix apart.
const modelIDs = 24

var (
	modelTags     = []string{"a", "ab", "abc", "b", "ba", "c"}
	modelPrefixes = []string{"", "a", "ab", "abc", "abcd", "b", "c", "x"}
	modelNames    = func() []string {
		var out []string
		for i := range 36 {
			out = append(out, "n"+strconv.Itoa(i))
		}
		return out
	}()
)

type modelEntry struct {
	obj *testObject
	rev Revision
}

// tableModel is the expected content of one table.
type tableModel struct {
	objs map[uint64]modelEntry
	rev  Revision
}

func newTableModel() tableModel { return tableModel{objs: map[uint64]modelEntry{}} }

func (m tableModel) clone() tableModel { return tableModel{objs: maps.Clone(m.objs), rev: m.rev} }

func (m *tableModel) put(o *testObject) {
	m.rev++
	m.objs[o.ID] = modelEntry{obj: o, rev: m.rev}
}

func (m *tableModel) del(id uint64) {
	m.rev++
	delete(m.objs, id)
}

// nameHolder returns the ID of the object holding name, if any.
func (m tableModel) nameHolder(name string) (uint64, bool) {
	for id, e := range m.objs {
		if e.obj.Name == name {
			return id, true
		}
	}
	return 0, false
}

// sorted returns the entries ordered by cmpFn.
func (m tableModel) sorted(cmpFn func(a, b modelEntry) int) []modelEntry {
	out := slices.Collect(maps.Values(m.objs))
	slices.SortFunc(out, cmpFn)
	return out
}

func byID(a, b modelEntry) int  { return cmp.Compare(a.obj.ID, b.obj.ID) }
func byRev(a, b modelEntry) int { return cmp.Compare(a.rev, b.rev) }

// modelTable is a table under test; indexed tables have the tags
// (non-unique, multi-key) and name (unique) secondary indexes.
type modelTable struct {
	tbl     RWTable[*testObject]
	indexed bool
}

func randObject(rng *rand.Rand, id uint64) *testObject {
	tags := slices.Clone(modelTags)
	rng.Shuffle(len(tags), func(i, j int) { tags[i], tags[j] = tags[j], tags[i] })
	return &testObject{
		ID:   id,
		Tags: tags[:rng.IntN(4)],
		Name: modelNames[rng.IntN(len(modelNames))],
	}
}

// collect returns the (object, revision) pairs of seq as model entries.
func collect(seq func(func(*testObject, Revision) bool)) []modelEntry {
	var out []modelEntry
	for o, rev := range seq {
		out = append(out, modelEntry{obj: o, rev: rev})
	}
	return out
}

func entriesString(es []modelEntry) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "%d@%d ", e.obj.ID, e.rev)
	}
	return strings.TrimSpace(b.String())
}

// equalEntries compares by object identity and revision: the table must
// return the very objects that were inserted.
func equalEntries(a, b []modelEntry) bool {
	return slices.EqualFunc(a, b, func(x, y modelEntry) bool { return x.obj == y.obj && x.rev == y.rev })
}

// checkTable compares everything readable from txn about mt with m.
func checkTable(t *testing.T, txn ReadTxn, mt modelTable, m tableModel, where string) {
	t.Helper()
	tbl := mt.tbl
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s: table %s: %s", where, tbl.Name(), fmt.Sprintf(format, args...))
	}
	if got := tbl.NumObjects(txn); got != len(m.objs) {
		fail("NumObjects = %d, want %d", got, len(m.objs))
	}
	if got := tbl.Revision(txn); got != m.rev {
		fail("Revision = %d, want %d", got, m.rev)
	}
	if got, want := collect(tbl.All(txn)), m.sorted(byID); !equalEntries(got, want) {
		fail("All = [%s], want [%s]", entriesString(got), entriesString(want))
	}
	for id := range uint64(modelIDs) {
		o, rev, found := tbl.Get(txn, idIndex.Query(id))
		want, ok := m.objs[id]
		if found != ok || ok && (o != want.obj || rev != want.rev) {
			fail("Get(%d) = %v@%d found=%v, want %v@%d found=%v", id, o, rev, found, want.obj, want.rev, ok)
		}
	}
	// LowerBound over the revision index: exactly the objects written at
	// or after r, in revision order.
	for _, r := range []Revision{0, 1, m.rev / 2, max(m.rev, 3) - 2, m.rev, m.rev + 1} {
		var want []modelEntry
		for _, e := range m.sorted(byRev) {
			if e.rev >= r {
				want = append(want, e)
			}
		}
		if got := collect(tbl.LowerBound(txn, ByRevision[*testObject](r))); !equalEntries(got, want) {
			fail("LowerBound(ByRevision(%d)) = [%s], want [%s]", r, entriesString(got), entriesString(want))
		}
	}
	if !mt.indexed {
		return
	}

	// Tags: List is exact, in primary key order; Get is its first.
	for _, tag := range modelTags {
		var want []modelEntry
		for _, e := range m.sorted(byID) {
			if slices.Contains(e.obj.Tags, tag) {
				want = append(want, e)
			}
		}
		if got := collect(tbl.List(txn, tagIndex.Query(tag))); !equalEntries(got, want) {
			fail("List(tags=%q) = [%s], want [%s]", tag, entriesString(got), entriesString(want))
		}
		o, rev, found := tbl.Get(txn, tagIndex.Query(tag))
		if found != (len(want) > 0) || found && (o != want[0].obj || rev != want[0].rev) {
			fail("Get(tags=%q) = %v@%d found=%v, want first of [%s]", tag, o, rev, found, entriesString(want))
		}
	}
	// Prefix on tags yields the object once per matching tag, in key order
	// (the tag, then the primary key).
	type tagged struct {
		key []byte
		e   modelEntry
	}
	for _, p := range modelPrefixes {
		var exp []tagged
		for _, e := range m.objs {
			for _, tag := range e.obj.Tags {
				if strings.HasPrefix(tag, p) {
					exp = append(exp, tagged{key: append([]byte(tag), index.Uint64(e.obj.ID)...), e: e})
				}
			}
		}
		slices.SortFunc(exp, func(a, b tagged) int { return bytes.Compare(a.key, b.key) })
		var want []modelEntry
		for _, x := range exp {
			want = append(want, x.e)
		}
		if got := collect(tbl.Prefix(txn, tagIndex.Query(p))); !equalEntries(got, want) {
			fail("Prefix(tags=%q) = [%s], want [%s]", p, entriesString(got), entriesString(want))
		}
		// LowerBound: once per tag >= p, in key order.
		exp = exp[:0]
		for _, e := range m.objs {
			for _, tag := range e.obj.Tags {
				if tag >= p {
					exp = append(exp, tagged{key: append([]byte(tag), index.Uint64(e.obj.ID)...), e: e})
				}
			}
		}
		slices.SortFunc(exp, func(a, b tagged) int { return bytes.Compare(a.key, b.key) })
		want = want[:0]
		for _, x := range exp {
			want = append(want, x.e)
		}
		if got := collect(tbl.LowerBound(txn, tagIndex.Query(p))); !equalEntries(got, want) {
			fail("LowerBound(tags=%q) = [%s], want [%s]", p, entriesString(got), entriesString(want))
		}
	}
	// Names: a unique index.
	for _, name := range modelNames {
		id, ok := m.nameHolder(name)
		o, rev, found := tbl.Get(txn, nameIndex.Query(name))
		if found != ok || ok && (o != m.objs[id].obj || rev != m.objs[id].rev) {
			fail("Get(name=%q) = %v@%d found=%v, want id %d found=%v", name, o, rev, found, id, ok)
		}
		got := collect(tbl.List(txn, nameIndex.Query(name)))
		if len(got) != map[bool]int{true: 1}[ok] || ok && got[0].obj != m.objs[id].obj {
			fail("List(name=%q) = [%s], want id %d found=%v", name, entriesString(got), id, ok)
		}
	}
	for _, p := range []string{"n1", "n2", "n", "x"} {
		want := m.sorted(func(a, b modelEntry) int { return strings.Compare(a.obj.Name, b.obj.Name) })
		want = slices.DeleteFunc(want, func(e modelEntry) bool { return !strings.HasPrefix(e.obj.Name, p) })
		if got := collect(tbl.Prefix(txn, nameIndex.Query(p))); !equalEntries(got, want) {
			fail("Prefix(name=%q) = [%s], want [%s]", p, entriesString(got), entriesString(want))
		}
	}
}

// checkTableQuick compares the cheap-to-read facts: size, revision and All.
func checkTableQuick(t *testing.T, txn ReadTxn, mt modelTable, m tableModel, where string) {
	t.Helper()
	tbl := mt.tbl
	if got, rev := tbl.NumObjects(txn), tbl.Revision(txn); got != len(m.objs) || rev != m.rev {
		t.Fatalf("%s: table %s: NumObjects = %d, Revision = %d, want %d, %d", where, tbl.Name(), got, rev, len(m.objs), m.rev)
	}
	if got, want := collect(tbl.All(txn)), m.sorted(byID); !equalEntries(got, want) {
		t.Fatalf("%s: table %s: All = [%s], want [%s]", where, tbl.Name(), entriesString(got), entriesString(want))
	}
}

// wantErr checks that err wraps target and names the table.
func wantErr(t *testing.T, err, target error, table, what string) {
	t.Helper()
	if target == nil {
		if err != nil {
			t.Fatalf("%s: unexpected error %v", what, err)
		}
		return
	}
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %v, want %v", what, err, target)
	}
	if !strings.Contains(err.Error(), strconv.Quote(table)) {
		t.Fatalf("%s: error %q does not name table %q", what, err, table)
	}
}

// modelOp applies one random write to mt within wtxn and to m, checking the
// results of the call against the model.
func modelOp(t *testing.T, rng *rand.Rand, wtxn WriteTxn, mt modelTable, m *tableModel) string {
	t.Helper()
	tbl, name := mt.tbl, mt.tbl.Name()
	id := uint64(rng.IntN(modelIDs))
	cur, exists := m.objs[id]

	// checkOld verifies the returned old object against the model's.
	checkOld := func(what string, old *testObject, hadOld bool, wantOld modelEntry, wantHad bool) {
		t.Helper()
		if hadOld != wantHad || wantHad && old != wantOld.obj {
			t.Fatalf("%s(%d) on %s: old=%v hadOld=%v, want %v %v", what, id, name, old, hadOld, wantOld.obj, wantHad)
		}
	}
	// conflicts reports whether obj's name is held by another object.
	conflicts := func(obj *testObject) bool {
		holder, held := m.nameHolder(obj.Name)
		return mt.indexed && held && holder != obj.ID
	}

	switch op := rng.IntN(100); {
	case op < 40:
		obj := randObject(rng, id)
		old, hadOld, err := tbl.Insert(wtxn, obj)
		if conflicts(obj) {
			wantErr(t, err, ErrUniqueConstraint, name, "Insert")
			return "insert-conflict"
		}
		wantErr(t, err, nil, name, "Insert")
		checkOld("Insert", old, hadOld, cur, exists)
		m.put(obj)
		return "insert"

	case op < 50:
		obj := randObject(rng, id)
		if !exists {
			old, hadOld, err := tbl.CompareAndSwap(wtxn, Revision(rng.IntN(10)), obj)
			wantErr(t, err, ErrObjectNotFound, name, "CompareAndSwap of missing")
			checkOld("CompareAndSwap", old, hadOld, modelEntry{}, false)
			return "cas-missing"
		}
		old, hadOld, err := tbl.CompareAndSwap(wtxn, cur.rev, obj)
		if conflicts(obj) {
			wantErr(t, err, ErrUniqueConstraint, name, "CompareAndSwap")
			return "cas-conflict"
		}
		wantErr(t, err, nil, name, "CompareAndSwap")
		checkOld("CompareAndSwap", old, hadOld, cur, true)
		m.put(obj)
		return "cas"

	case op < 55:
		if !exists {
			return "noop"
		}
		wrong := cur.rev + 1 + Revision(rng.IntN(3))
		if rng.IntN(2) == 0 && cur.rev > 0 {
			wrong = cur.rev - 1
		}
		old, hadOld, err := tbl.CompareAndSwap(wtxn, wrong, randObject(rng, id))
		wantErr(t, err, ErrRevisionNotEqual, name, "CompareAndSwap with wrong revision")
		checkOld("CompareAndSwap(wrong rev)", old, hadOld, cur, true)
		return "cas-wrong"

	case op < 75:
		old, hadOld, err := tbl.Delete(wtxn, &testObject{ID: id})
		wantErr(t, err, nil, name, "Delete")
		checkOld("Delete", old, hadOld, cur, exists)
		if exists {
			m.del(id)
		}
		return "delete"

	case op < 82:
		if !exists {
			old, hadOld, err := tbl.CompareAndDelete(wtxn, 1, &testObject{ID: id})
			wantErr(t, err, ErrObjectNotFound, name, "CompareAndDelete of missing")
			checkOld("CompareAndDelete", old, hadOld, modelEntry{}, false)
			return "cad-missing"
		}
		old, hadOld, err := tbl.CompareAndDelete(wtxn, cur.rev, &testObject{ID: id})
		wantErr(t, err, nil, name, "CompareAndDelete")
		checkOld("CompareAndDelete", old, hadOld, cur, true)
		m.del(id)
		return "cad"

	case op < 86:
		if !exists {
			return "noop"
		}
		old, hadOld, err := tbl.CompareAndDelete(wtxn, cur.rev+1, &testObject{ID: id})
		wantErr(t, err, ErrRevisionNotEqual, name, "CompareAndDelete with wrong revision")
		checkOld("CompareAndDelete(wrong rev)", old, hadOld, cur, true)
		return "cad-wrong"

	case op < 88:
		if err := tbl.DeleteAll(wtxn); err != nil {
			t.Fatalf("DeleteAll: %v", err)
		}
		for _, e := range m.sorted(byID) {
			m.del(e.obj.ID)
		}
		return "delete-all"

	case op < 90:
		// Deleting while iterating the same table in the same WriteTxn.
		for o := range tbl.All(wtxn) {
			if _, hadOld, err := tbl.Delete(wtxn, o); err != nil || !hadOld {
				t.Fatalf("Delete(%d) while iterating All: hadOld=%v err=%v", o.ID, hadOld, err)
			}
		}
		for _, e := range m.sorted(byID) {
			m.del(e.obj.ID)
		}
		return "delete-iterating-all"

	case op < 94 && mt.indexed:
		tag := modelTags[rng.IntN(len(modelTags))]
		for o := range tbl.List(wtxn, tagIndex.Query(tag)) {
			if _, hadOld, err := tbl.Delete(wtxn, o); err != nil || !hadOld {
				t.Fatalf("Delete(%d) while iterating List(%q): hadOld=%v err=%v", o.ID, tag, hadOld, err)
			}
		}
		for _, e := range m.sorted(byID) {
			if slices.Contains(e.obj.Tags, tag) {
				m.del(e.obj.ID)
			}
		}
		return "delete-iterating-list"

	default:
		// Re-tag while iterating a prefix: every object under the prefix is
		// replaced by a clone without tags; the iteration must not see the
		// replacements.
		p := modelPrefixes[rng.IntN(len(modelPrefixes))]
		seen := map[uint64]bool{}
		seq := tbl.All(wtxn)
		if mt.indexed {
			seq = tbl.Prefix(wtxn, tagIndex.Query(p))
		}
		for o := range seq {
			if seen[o.ID] {
				continue // once per matching tag
			}
			seen[o.ID] = true
			c := o.clone()
			c.Tags = nil
			if _, _, err := tbl.Insert(wtxn, c); err != nil {
				t.Fatalf("Insert while iterating: %v", err)
			}
			m.put(c)
		}
		return "retag-iterating"
	}
}

// modelSnapshot is an old ReadTxn and the model as of it.
type modelSnapshot struct {
	txn    ReadTxn
	models []tableModel
	at     int // commit number
}

func TestModel(t *testing.T) { forEachReplay(t, testModel) }

func testModel(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	ops := envInt(t, "STATEDB_MODEL_OPS", 4000)

	db := New()
	alpha, err := NewTable(db, "alpha", idIndex, tagIndex, nameIndex)
	if err != nil {
		t.Fatal(err)
	}
	beta, err := NewTable(db, "beta", idIndex)
	if err != nil {
		t.Fatal(err)
	}
	tables := []modelTable{{tbl: alpha, indexed: true}, {tbl: beta}}
	models := []tableModel{newTableModel(), newTableModel()}
	var snapshots []modelSnapshot

	checkAll := func(txn ReadTxn, ms []tableModel, where string) {
		t.Helper()
		for i := range tables {
			checkTable(t, txn, tables[i], ms[i], where)
		}
	}
	checkQuick := func(txn ReadTxn, ms []tableModel, where string) {
		t.Helper()
		for i := range tables {
			checkTableQuick(t, txn, tables[i], ms[i], where)
		}
	}

	commits, aborts := 0, 0
	for done := 0; done < ops; {
		// Pick one or both tables, in random argument order.
		touch := [][]int{{0}, {1}, {0, 1}, {1, 0}}[rng.IntN(4)]
		metas := make([]TableMeta, len(touch))
		for i, ti := range touch {
			metas[i] = tables[ti].tbl
		}
		wtxn := db.WriteTxn(metas[0], metas[1:]...)
		working := []tableModel{models[0].clone(), models[1].clone()}
		var trace []string
		for range 1 + rng.IntN(8) {
			ti := touch[rng.IntN(len(touch))]
			op := modelOp(t, rng, wtxn, tables[ti], &working[ti])
			trace = append(trace, tables[ti].tbl.Name()+":"+op)
			done++
			// Reads inside the WriteTxn see its own writes (a full check
			// after some operations, to keep the default run fast).
			if rng.IntN(4) == 0 {
				checkTable(t, wtxn, tables[ti], working[ti], fmt.Sprintf("in WriteTxn after %v", trace))
			} else {
				checkTableQuick(t, wtxn, tables[ti], working[ti], fmt.Sprintf("in WriteTxn after %v", trace))
			}
		}
		where := fmt.Sprintf("commit %d %v", commits, trace)
		checkAll(wtxn, working, "in WriteTxn before commit, "+where)
		// Writing to a table the txn did not lock fails and names it.
		if len(touch) == 1 {
			other := tables[1-touch[0]].tbl
			_, _, err := other.Insert(wtxn, &testObject{ID: 1})
			wantErr(t, err, ErrTableNotLockedForWriting, other.Name(), "Insert into unlocked table")
		}
		// Others do not see uncommitted writes.
		checkQuick(db.ReadTxn(), models, "ReadTxn during WriteTxn, "+where)

		if rng.IntN(10) == 0 {
			wtxn.Abort()
			aborts++
			checkAll(db.ReadTxn(), models, "after Abort, "+where)
		} else {
			rtxn := wtxn.Commit()
			commits++
			models = working
			checkAll(rtxn, models, "txn returned by Commit, "+where)
			checkQuick(db.ReadTxn(), models, "after "+where)
		}
		wtxn.Abort() // a no-op after Commit or Abort
		_, _, err := tables[touch[0]].tbl.Insert(wtxn, &testObject{ID: 1})
		wantErr(t, err, ErrTransactionClosed, tables[touch[0]].tbl.Name(), "Insert after Commit/Abort")

		// Snapshot isolation: old ReadTxns keep seeing their state.
		switch {
		case len(snapshots) < 4:
			snapshots = append(snapshots, modelSnapshot{db.ReadTxn(), []tableModel{models[0].clone(), models[1].clone()}, commits})
		case rng.IntN(20) == 0:
			snapshots[rng.IntN(len(snapshots))] = modelSnapshot{db.ReadTxn(), []tableModel{models[0].clone(), models[1].clone()}, commits}
		}
		s := snapshots[rng.IntN(len(snapshots))]
		where = fmt.Sprintf("old ReadTxn of commit %d, now at commit %d", s.at, commits)
		if rng.IntN(4) == 0 {
			checkAll(s.txn, s.models, where)
		} else {
			checkQuick(s.txn, s.models, where)
		}
	}
	for _, s := range snapshots {
		checkAll(s.txn, s.models, fmt.Sprintf("old ReadTxn of commit %d at the end", s.at))
	}
	t.Logf("%d operations in %d commits and %d aborts; final revisions %d, %d",
		ops, commits, aborts, models[0].rev, models[1].rev)
}

// TestReadOwnWrites is the story version of what TestModel checks: reads in a
// WriteTxn see its writes, nobody else does until Commit.
func TestReadOwnWrites(t *testing.T) {
	db, tbl := newTestTable(t, "objs", tagIndex, nameIndex)
	wtxn := db.WriteTxn(tbl)
	defer wtxn.Abort()
	a := &testObject{ID: 1, Tags: []string{"x"}, Name: "a"}
	tbl.Insert(wtxn, a)
	if o, rev, found := tbl.Get(wtxn, idIndex.Query(1)); !found || o != a || rev != 1 {
		t.Fatalf("Get in WriteTxn = %v@%d %v", o, rev, found)
	}
	if o, _, found := tbl.Get(wtxn, nameIndex.Query("a")); !found || o != a {
		t.Fatalf("Get(name) in WriteTxn = %v %v", o, found)
	}
	if got := ids(tbl.List(wtxn, tagIndex.Query("x"))); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("List(x) in WriteTxn = %v", got)
	}
	// An iterator taken before a write does not see it; one taken after does.
	before := tbl.All(wtxn)
	b := &testObject{ID: 2, Name: "b"}
	tbl.Insert(wtxn, b)
	if got := ids(before); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("All taken before the insert = %v, want [1]", got)
	}
	if got := ids(tbl.All(wtxn)); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("All in WriteTxn = %v", got)
	}
	if n := tbl.NumObjects(db.ReadTxn()); n != 0 {
		t.Fatalf("ReadTxn sees %d uncommitted objects", n)
	}
	if tbl.Revision(wtxn) != 2 || tbl.Revision(db.ReadTxn()) != 0 {
		t.Fatalf("Revision in WriteTxn %d (want 2), outside %d (want 0)", tbl.Revision(wtxn), tbl.Revision(db.ReadTxn()))
	}
}

// TestDeleteWhileIterating deletes every object of a table while iterating
// it (and each of its indexes) in the same WriteTxn.
func TestDeleteWhileIterating(t *testing.T) {
	const n = 300
	fill := func(db *DB, tbl RWTable[*testObject]) {
		wtxn := db.WriteTxn(tbl)
		for i := range uint64(n) {
			tbl.Insert(wtxn, &testObject{ID: i, Tags: []string{"all", "t" + strconv.Itoa(int(i%7))}, Name: "n" + strconv.Itoa(int(i))})
		}
		wtxn.Commit()
	}
	for _, tc := range []struct {
		name string
		seq  func(tbl RWTable[*testObject], txn ReadTxn) func(func(*testObject, Revision) bool)
	}{
		{"All", func(tbl RWTable[*testObject], txn ReadTxn) func(func(*testObject, Revision) bool) {
			return tbl.All(txn)
		}},
		{"List", func(tbl RWTable[*testObject], txn ReadTxn) func(func(*testObject, Revision) bool) {
			return tbl.List(txn, tagIndex.Query("all"))
		}},
		{"Prefix", func(tbl RWTable[*testObject], txn ReadTxn) func(func(*testObject, Revision) bool) {
			return tbl.Prefix(txn, tagIndex.Query("t"))
		}},
		{"PrefixUnique", func(tbl RWTable[*testObject], txn ReadTxn) func(func(*testObject, Revision) bool) {
			return tbl.Prefix(txn, nameIndex.Query("n"))
		}},
		{"LowerBound", func(tbl RWTable[*testObject], txn ReadTxn) func(func(*testObject, Revision) bool) {
			return tbl.LowerBound(txn, ByRevision[*testObject](0))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, tbl := newTestTable(t, "objs", tagIndex, nameIndex)
			fill(db, tbl)
			wtxn := db.WriteTxn(tbl)
			visited := 0
			for o := range tc.seq(tbl, wtxn) {
				visited++
				if _, had, err := tbl.Delete(wtxn, o); err != nil || !had {
					t.Fatalf("Delete(%d): had=%v err=%v", o.ID, had, err)
				}
			}
			if visited != n {
				t.Fatalf("visited %d objects, want %d", visited, n)
			}
			if got := tbl.NumObjects(wtxn); got != 0 {
				t.Fatalf("NumObjects in WriteTxn = %d, want 0", got)
			}
			rtxn := wtxn.Commit()
			if got := tbl.NumObjects(rtxn); got != 0 {
				t.Fatalf("NumObjects after commit = %d, want 0", got)
			}
			if got := ids(tbl.Prefix(rtxn, tagIndex.Query(""))); len(got) != 0 {
				t.Fatalf("tags index still holds %v", got)
			}
			if got := ids(tbl.LowerBound(rtxn, ByRevision[*testObject](0))); len(got) != 0 {
				t.Fatalf("revision index still holds %v", got)
			}
		})
	}
}

// nonUniqueFixture is a table with string primary keys (names) and a
// non-unique tags index, where tag "a" is a prefix of tag "ab" and the object
// with tag "a" has a primary key that sorts after the one with "ab".
func nonUniqueFixture(t *testing.T) (ReadTxn, RWTable[*testObject]) {
	t.Helper()
	db := New()
	tbl, err := NewTable(db, "byname", nameIndex, tagIndex)
	if err != nil {
		t.Fatal(err)
	}
	wtxn := db.WriteTxn(tbl)
	for _, o := range []*testObject{{Name: "zzz", Tags: []string{"a"}}, {Name: "000", Tags: []string{"ab"}}, {Name: "mmm", Tags: []string{"b"}}} {
		tbl.Insert(wtxn, o)
	}
	return wtxn.Commit(), tbl
}

func objectNames(seq func(func(*testObject, Revision) bool)) []string {
	var out []string
	for o := range seq {
		out = append(out, o.Name)
	}
	return out
}

// TestNonUniqueLowerBound: LowerBound on a non-unique index yields only
// objects whose key is >= the query key, whatever their primary keys.
func TestNonUniqueLowerBound(t *testing.T) {
	txn, tbl := nonUniqueFixture(t)
	got := objectNames(tbl.LowerBound(txn, tagIndex.Query("ab")))
	slices.Sort(got)
	if want := []string{"000", "mmm"}; !slices.Equal(got, want) {
		t.Fatalf("LowerBound(tags >= ab) = %v, want %v (zzz has only tag a < ab)", got, want)
	}
	if got := objectNames(tbl.LowerBound(txn, tagIndex.Query("c"))); len(got) != 0 {
		t.Fatalf("LowerBound(tags >= c) = %v, want none", got)
	}
}

// TestNonUniqueKeyOrder: Prefix and LowerBound on a non-unique index yield
// in key order, as documented, also when a shorter key's primary key sorts
// after the rest of a longer key ("a"+"zzz" versus "ab"+"000").
func TestNonUniqueKeyOrder(t *testing.T) {
	txn, tbl := nonUniqueFixture(t)
	if got, want := objectNames(tbl.Prefix(txn, tagIndex.Query("a"))), []string{"zzz", "000"}; !slices.Equal(got, want) {
		t.Errorf("Prefix(tags a) = %v, want %v in key order (a, ab)", got, want)
	}
	if got, want := objectNames(tbl.LowerBound(txn, tagIndex.Query("a"))), []string{"zzz", "000", "mmm"}; !slices.Equal(got, want) {
		t.Errorf("LowerBound(tags >= a) = %v, want %v in key order (a, ab, b)", got, want)
	}
}
