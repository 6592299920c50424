package statedb

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/steadystate/steadystate/index"
)

// Tests of the replays that run beside the writer (startReplay in
// deferred_index.go): GOMAXPROCS-1 goroutines that each take the next
// deferred index, the first panic kept,
// Abort cancelling them. The tests set GOMAXPROCS, so that they run the
// same on any machine. The model test compares every index with a map
// after random writes; the others hold an index's replay still (a
// channel in its key function, in a synctest bubble) to check what must
// wait for it.

// asyncObj is the object of these tests: keys for two non-unique indexes,
// a count, and prefixes for two LPM indexes.
type asyncObj struct {
	ID       uint64
	Tags     []string
	Kind     string
	Prefixes []netip.Prefix
}

func (o *asyncObj) clone() *asyncObj { c := *o; return &c }

func (o *asyncObj) String() string {
	return fmt.Sprintf("%d%v/%s%v", o.ID, o.Tags, o.Kind, o.Prefixes)
}

// firstNet is the object's first prefix, or none.
func firstNet(o *asyncObj) netip.Prefix {
	if len(o.Prefixes) == 0 {
		return netip.Prefix{}
	}
	return o.Prefixes[0]
}

func strKeys(ss ...string) index.KeySet {
	keys := make([]index.Key, len(ss))
	for i, s := range ss {
		keys[i] = index.String(s)
	}
	return index.NewKeySet(keys...)
}

var (
	asyncID = Index[*asyncObj, uint64]{
		Name:       "id",
		FromObject: func(o *asyncObj) index.KeySet { return index.NewKeySet(index.Uint64(o.ID)) },
		FromKey:    index.Uint64,
		Unique:     true,
	}
	asyncTags = Index[*asyncObj, string]{
		Name:       "tags",
		FromObject: func(o *asyncObj) index.KeySet { return strKeys(o.Tags...) },
		FromKey:    index.String,
	}
	asyncKind = Index[*asyncObj, string]{
		Name:       "kind",
		FromObject: func(o *asyncObj) index.KeySet { return strKeys(o.Kind) },
		FromKey:    index.String,
	}
	asyncCount = Index[*asyncObj, int]{
		Name:       "count",
		FromObject: func(o *asyncObj) index.KeySet { return index.NewKeySet(index.Int(len(o.Tags))) },
		FromKey:    index.Int,
	}
	// asyncNets replays through FromObject (a KeySet); asyncFirst through
	// Prefix, in the replay's own key buffers (keyScratch).
	asyncNets  = LPMIndex[*asyncObj]{Name: "nets", FromObject: func(o *asyncObj) []netip.Prefix { return o.Prefixes }}
	asyncFirst = LPMIndex[*asyncObj]{Name: "first", Prefix: firstNet}
)

// Pools of keys. No tag or kind is a prefix of another, so that an
// index's order is the key's, then the ID's.
var (
	asyncTagPool  = []string{"red", "green", "blue", "gold"}
	asyncKindPool = []string{"a", "b", "c"}
	asyncNetPool  = []netip.Prefix{
		pfx("0.0.0.0/0"), pfx("10.0.0.0/8"), pfx("10.1.0.0/16"), pfx("10.1.2.0/24"),
		pfx("10.1.2.3/32"), pfx("192.168.0.0/16"), pfx("192.168.1.0/24"),
		pfx("2001:db8::/32"), pfx("2001:db8:1::/48"),
	}
	asyncAddrPool = []netip.Addr{
		addr("10.1.2.3"), addr("10.1.2.4"), addr("10.1.3.1"), addr("10.2.0.1"), addr("192.168.1.1"),
		addr("192.168.2.1"), addr("8.8.8.8"), addr("2001:db8:1::1"), addr("2001:db8:2::1"), addr("::1"),
	}
)

const asyncIDs = 48

func randAsyncObj(rng *rand.Rand, id uint64) *asyncObj {
	o := &asyncObj{ID: id, Kind: asyncKindPool[rng.IntN(len(asyncKindPool))]}
	tags := slices.Clone(asyncTagPool)
	rng.Shuffle(len(tags), func(i, j int) { tags[i], tags[j] = tags[j], tags[i] })
	o.Tags = tags[:rng.IntN(len(tags))]
	nets := slices.Clone(asyncNetPool)
	rng.Shuffle(len(nets), func(i, j int) { nets[i], nets[j] = nets[j], nets[i] })
	o.Prefixes = nets[:rng.IntN(4)]
	if rng.IntN(10) == 0 {
		o.Prefixes = append([]netip.Prefix{{}}, o.Prefixes...) // not indexed
	}
	return o
}

// setReplay sets the replay knobs for t (see forEachReplay) and
// GOMAXPROCS to procs: a replay runs beside the writer only if it is more
// than 1, on procs-1 goroutines.
func setReplay(t *testing.T, above, at int64, procs int) {
	t.Helper()
	oldAbove, oldAt := parallelReplayAbove.Swap(above), asyncReplayAt.Swap(at)
	oldProcs := runtime.GOMAXPROCS(procs)
	t.Cleanup(func() {
		parallelReplayAbove.Store(oldAbove)
		asyncReplayAt.Store(oldAt)
		runtime.GOMAXPROCS(oldProcs)
	})
}

// asyncOf returns the replay of tbl that runs (or ran and was not yet
// waited for) beside wtxn's writer, or nil.
func asyncOf(wtxn WriteTxn, tbl TableMeta) *asyncReplay {
	return wtxn.(*writeTxn).s.table(tbl.meta()).async
}

// asyncEntry is an object and its revision, as the model expects them.
type asyncEntry struct {
	obj *asyncObj
	rev Revision
}

// asyncModel is the expected content of one table.
type asyncModel struct {
	objs map[uint64]asyncEntry
	rev  Revision
}

func newAsyncModel() asyncModel { return asyncModel{objs: map[uint64]asyncEntry{}} }

func (m asyncModel) clone() asyncModel { return asyncModel{objs: maps.Clone(m.objs), rev: m.rev} }

func (m *asyncModel) put(o *asyncObj) {
	m.rev++
	m.objs[o.ID] = asyncEntry{o, m.rev}
}

func (m *asyncModel) del(id uint64) {
	m.rev++
	delete(m.objs, id)
}

func (m asyncModel) sorted(by func(a, b asyncEntry) int) []asyncEntry {
	out := slices.Collect(maps.Values(m.objs))
	slices.SortFunc(out, by)
	return out
}

func asyncByID(a, b asyncEntry) int  { return cmp.Compare(a.obj.ID, b.obj.ID) }
func asyncByRev(a, b asyncEntry) int { return cmp.Compare(a.rev, b.rev) }

func asyncCollect(seq func(func(*asyncObj, Revision) bool)) []asyncEntry {
	var out []asyncEntry
	for o, rev := range seq {
		out = append(out, asyncEntry{o, rev})
	}
	return out
}

// sameAsync compares by object identity and revision.
func sameAsync(a, b []asyncEntry) bool {
	return slices.EqualFunc(a, b, func(x, y asyncEntry) bool { return x.obj == y.obj && x.rev == y.rev })
}

func asyncString(es []asyncEntry) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "%d@%d ", e.obj.ID, e.rev)
	}
	return strings.TrimSpace(b.String())
}

// asyncDiff tells how got differs from want: in full when short, else
// around the first difference.
func asyncDiff(got, want []asyncEntry) string {
	if len(got)+len(want) <= 60 {
		return fmt.Sprintf("[%s], want [%s]", asyncString(got), asyncString(want))
	}
	i := 0
	for i < len(got) && i < len(want) && got[i].obj == want[i].obj && got[i].rev == want[i].rev {
		i++
	}
	from := max(i-3, 0)
	return fmt.Sprintf("%d entries, want %d; from entry %d: [%s ...], want [%s ...]", len(got), len(want), from,
		asyncString(got[from:min(i+5, len(got))]), asyncString(want[from:min(i+5, len(want))]))
}

// checkAsync compares the table's content, revision order and every
// index named in indexes (of asyncTags, asyncKind, asyncCount, asyncNets,
// asyncFirst) with m.
func checkAsync(t *testing.T, txn ReadTxn, tbl Table[*asyncObj], indexes []string, m asyncModel, where string) {
	t.Helper()
	if got, rev := tbl.NumObjects(txn), tbl.Revision(txn); got != len(m.objs) || rev != m.rev {
		t.Fatalf("%s: table %s: NumObjects = %d, Revision = %d, want %d, %d", where, tbl.Name(), got, rev, len(m.objs), m.rev)
	}
	if got, want := asyncCollect(tbl.All(txn)), m.sorted(asyncByID); !sameAsync(got, want) {
		t.Fatalf("%s: table %s: All = %s", where, tbl.Name(), asyncDiff(got, want))
	}
	if got, want := asyncCollect(tbl.LowerBound(txn, ByRevision[*asyncObj](0))), m.sorted(asyncByRev); !sameAsync(got, want) {
		t.Fatalf("%s: table %s: revision order = %s", where, tbl.Name(), asyncDiff(got, want))
	}
	for _, name := range indexes {
		checkAsyncIndex(t, txn, tbl, name, m, where)
	}
}

// checkAsyncIndex compares one index with m: a List per key, and the
// whole index in its order.
func checkAsyncIndex(t *testing.T, txn ReadTxn, tbl Table[*asyncObj], name string, m asyncModel, where string) {
	t.Helper()
	switch name {
	case asyncTags.Name:
		checkAsyncStrings(t, txn, tbl, asyncTags, asyncTagPool, func(o *asyncObj) []string { return o.Tags }, m, where)
	case asyncKind.Name:
		checkAsyncStrings(t, txn, tbl, asyncKind, asyncKindPool, func(o *asyncObj) []string { return []string{o.Kind} }, m, where)
	case asyncCount.Name:
		for n := range len(asyncTagPool) {
			want := slices.DeleteFunc(m.sorted(asyncByID), func(e asyncEntry) bool { return len(e.obj.Tags) != n })
			if got := asyncCollect(tbl.List(txn, asyncCount.Query(n))); !sameAsync(got, want) {
				t.Fatalf("%s: table %s: List(count=%d) = %s", where, tbl.Name(), n, asyncDiff(got, want))
			}
		}
	case asyncNets.Name:
		checkAsyncLPM(t, txn, tbl, asyncNets, func(o *asyncObj) []netip.Prefix { return o.Prefixes }, m, where)
	case asyncFirst.Name:
		checkAsyncLPM(t, txn, tbl, asyncFirst, func(o *asyncObj) []netip.Prefix { return []netip.Prefix{firstNet(o)} }, m, where)
	default:
		t.Fatalf("no check for index %q", name)
	}
}

func checkAsyncStrings(t *testing.T, txn ReadTxn, tbl Table[*asyncObj], idx Index[*asyncObj, string], pool []string, keysOf func(*asyncObj) []string, m asyncModel, where string) {
	t.Helper()
	type keyed struct {
		key string
		e   asyncEntry
	}
	var all []keyed
	for _, e := range m.objs {
		for _, k := range keysOf(e.obj) {
			all = append(all, keyed{k, e})
		}
	}
	slices.SortFunc(all, func(a, b keyed) int { return cmp.Or(cmp.Compare(a.key, b.key), asyncByID(a.e, b.e)) })
	var want []asyncEntry
	for _, x := range all {
		want = append(want, x.e)
	}
	if got := asyncCollect(tbl.Prefix(txn, idx.Query(""))); !sameAsync(got, want) {
		t.Fatalf("%s: table %s: index %s in order = %s", where, tbl.Name(), idx.Name, asyncDiff(got, want))
	}
	for _, k := range pool {
		want = want[:0]
		for _, x := range all {
			if x.key == k {
				want = append(want, x.e)
			}
		}
		if got := asyncCollect(tbl.List(txn, idx.Query(k))); !sameAsync(got, want) {
			t.Fatalf("%s: table %s: List(%s=%q) = %s", where, tbl.Name(), idx.Name, k, asyncDiff(got, want))
		}
	}
}

func checkAsyncLPM(t *testing.T, txn ReadTxn, tbl Table[*asyncObj], idx LPMIndex[*asyncObj], prefixesOf func(*asyncObj) []netip.Prefix, m asyncModel, where string) {
	t.Helper()
	type keyed struct {
		p netip.Prefix
		e asyncEntry
	}
	var all []keyed
	for _, e := range m.objs {
		for _, p := range prefixesOf(e.obj) {
			if p.IsValid() {
				all = append(all, keyed{p, e})
			}
		}
	}
	slices.SortFunc(all, func(a, b keyed) int { return cmp.Or(comparePrefixes(a.p, b.p), asyncByID(a.e, b.e)) })
	var want []asyncEntry
	for _, x := range all {
		want = append(want, x.e)
	}
	if got := asyncCollect(tbl.Prefix(txn, idx.QueryAll())); !sameAsync(got, want) {
		t.Fatalf("%s: table %s: index %s in order = %s", where, tbl.Name(), idx.Name, asyncDiff(got, want))
	}
	for _, a := range asyncAddrPool {
		// The objects of the longest stored prefix that holds a.
		q := netip.PrefixFrom(a, a.BitLen())
		longest := -1
		for _, x := range all {
			if contains(x.p, q) {
				longest = max(longest, x.p.Bits())
			}
		}
		want = want[:0]
		for _, x := range all {
			if contains(x.p, q) && x.p.Bits() == longest {
				want = append(want, x.e)
			}
		}
		if got := asyncCollect(tbl.List(txn, idx.Query(a))); !sameAsync(got, want) {
			t.Fatalf("%s: table %s: List(%s=%s) = %s", where, tbl.Name(), idx.Name, a, asyncDiff(got, want))
		}
	}
}

// asyncTable is a table of the model test, its model, and a change
// iterator with what its changes add up to.
type asyncTable struct {
	tbl     RWTable[*asyncObj]
	indexes []string
	m       asyncModel
	it      ChangeIterator[*asyncObj]
	seen    map[uint64]asyncEntry
}

// asyncOp applies one random write to at.tbl in wtxn and to m, checking
// what the call returns against the model.
func asyncOp(t *testing.T, rng *rand.Rand, wtxn WriteTxn, at *asyncTable, m *asyncModel, where string) {
	t.Helper()
	tbl := at.tbl
	id := uint64(rng.IntN(asyncIDs))
	stored, ok := m.objs[id]
	// The write returned the stored object, if any.
	wantOld := func(op string, old *asyncObj, had bool, err error) {
		t.Helper()
		if err != nil || had != ok || ok && old != stored.obj {
			t.Fatalf("%s: %s of %d: old %v had %v err %v, want %v had %v", where, op, id, old, had, err, stored.obj, ok)
		}
	}
	put := func(o *asyncObj) {
		t.Helper()
		m.put(o)
		// The primary index is written at once: its revision is there.
		if got, rev, found := tbl.Get(wtxn, asyncID.Query(id)); !found || got != o || rev != m.rev {
			t.Fatalf("%s: after the write of %d: Get = %v@%d found %v, want %v@%d", where, id, got, rev, found, o, m.rev)
		}
	}
	switch r := rng.IntN(100); {
	case r < 30:
		o := randAsyncObj(rng, id)
		old, had, err := tbl.Insert(wtxn, o)
		wantOld("Insert", old, had, err)
		put(o)
	case r < 45:
		// The keys stay (a status written), or a new object.
		o := randAsyncObj(rng, id)
		if ok {
			o = stored.obj.clone()
		}
		old, had, err := tbl.Insert(wtxn, o)
		wantOld("Insert", old, had, err)
		put(o)
	case r < 58:
		old, had, err := tbl.Delete(wtxn, &asyncObj{ID: id})
		wantOld("Delete", old, had, err)
		if ok {
			m.del(id)
		}
	case r < 72:
		o := randAsyncObj(rng, id)
		switch {
		case !ok:
			if _, _, err := tbl.CompareAndSwap(wtxn, 1, o); !errors.Is(err, ErrObjectNotFound) {
				t.Fatalf("%s: CompareAndSwap of missing %d: %v, want ErrObjectNotFound", where, id, err)
			}
		case rng.IntN(3) == 0:
			old, had, err := tbl.CompareAndSwap(wtxn, stored.rev+1, o)
			if !errors.Is(err, ErrRevisionNotEqual) || !had || old != stored.obj {
				t.Fatalf("%s: CompareAndSwap of %d at a wrong revision: old %v had %v err %v", where, id, old, had, err)
			}
		default:
			old, had, err := tbl.CompareAndSwap(wtxn, stored.rev, o)
			wantOld("CompareAndSwap", old, had, err)
			put(o)
		}
	case r < 80:
		switch {
		case !ok:
			if _, _, err := tbl.CompareAndDelete(wtxn, 1, &asyncObj{ID: id}); !errors.Is(err, ErrObjectNotFound) {
				t.Fatalf("%s: CompareAndDelete of missing %d: %v, want ErrObjectNotFound", where, id, err)
			}
		case rng.IntN(3) == 0:
			if _, _, err := tbl.CompareAndDelete(wtxn, stored.rev+1, &asyncObj{ID: id}); !errors.Is(err, ErrRevisionNotEqual) {
				t.Fatalf("%s: CompareAndDelete of %d at a wrong revision: %v", where, id, err)
			}
		default:
			old, had, err := tbl.CompareAndDelete(wtxn, stored.rev, &asyncObj{ID: id})
			wantOld("CompareAndDelete", old, had, err)
			m.del(id)
		}
	default:
		// Modify: the stored tags, the new kind and prefixes.
		o := randAsyncObj(rng, id)
		merged := o
		old, had, err := tbl.Modify(wtxn, o, func(old, new *asyncObj) *asyncObj {
			merged = &asyncObj{ID: new.ID, Tags: old.Tags, Kind: new.Kind, Prefixes: new.Prefixes}
			return merged
		})
		wantOld("Modify", old, had, err)
		put(merged)
	}
	if rng.IntN(400) == 0 {
		if err := tbl.DeleteAll(wtxn); err != nil {
			t.Fatalf("%s: DeleteAll: %v", where, err)
		}
		for _, e := range m.sorted(asyncByID) { // deleted in primary key order
			m.del(e.obj.ID)
		}
	}
}

// TestAsyncReplayModel runs random transactions over two tables of three
// and five deferred indexes (two non-unique, a count, and LPM indexes of
// several prefixes and of one through Prefix), with a replay beside the writer every write or every three,
// on one goroutine, two, or one per index: inserts, keys written again
// and again in one transaction, deletes, compare-and-swaps and -deletes,
// Modify, DeleteAll, aborts. Reads of a random index in the middle of a
// transaction (they wait for the replays), the whole transaction before
// Commit, the committed state, the snapshot from before the transaction
// and the change iterators are all compared with the model.
func TestAsyncReplayModel(t *testing.T) {
	for _, c := range []struct {
		name      string
		above, at int64
		procs     int
	}{
		{"one-goroutine-every-write", parallelReplayAbove.Load(), 1, 2},
		{"two-goroutines-parallel-flush", 1, 3, 3},
		{"goroutine-per-index", parallelReplayAbove.Load(), 3, 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			setReplay(t, c.above, c.at, c.procs)
			testAsyncReplayModel(t)
		})
	}
}

func testAsyncReplayModel(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	db := New()
	tables := []*asyncTable{
		{indexes: []string{"tags", "kind", "nets"}},
		{indexes: []string{"tags", "kind", "nets", "first", "count"}},
	}
	secondary := map[string]Indexer[*asyncObj]{"tags": asyncTags, "kind": asyncKind, "count": asyncCount, "nets": asyncNets, "first": asyncFirst}
	for i, at := range tables {
		var idxs []Indexer[*asyncObj]
		for _, n := range at.indexes {
			idxs = append(idxs, secondary[n])
		}
		tbl, err := NewTable(db, fmt.Sprintf("async%d", i), asyncID, idxs...)
		if err != nil {
			t.Fatal(err)
		}
		at.tbl, at.m, at.seen = tbl, newAsyncModel(), map[uint64]asyncEntry{}
	}
	wtxn := db.WriteTxn(tables[0].tbl, tables[1].tbl)
	for _, at := range tables {
		it, err := at.tbl.Changes(wtxn)
		if err != nil {
			t.Fatal(err)
		}
		at.it = it
		defer it.Close()
	}
	wtxn.Commit()

	rounds := envInt(t, "ASYNC_REPLAY_ROUNDS", 80)
	started := 0 // writes after which a replay was beside the writer
	for round := range rounds {
		before := db.ReadTxn()
		prev := []asyncModel{tables[0].m, tables[1].m}
		cur := []asyncModel{tables[0].m.clone(), tables[1].m.clone()}
		wtxn := db.WriteTxn(tables[0].tbl, tables[1].tbl)
		for op := range 1 + rng.IntN(300) {
			k := rng.IntN(len(tables))
			at := tables[k]
			where := fmt.Sprintf("round %d op %d", round, op)
			asyncOp(t, rng, wtxn, at, &cur[k], where)
			if asyncOf(wtxn, at.tbl) != nil {
				started++
			}
			if rng.IntN(15) == 0 {
				name := at.indexes[rng.IntN(len(at.indexes))]
				checkAsyncIndex(t, wtxn, at.tbl, name, cur[k], where+" (a read in the WriteTxn)")
			}
		}
		where := fmt.Sprintf("round %d", round)
		if rng.IntN(3) == 0 {
			for k, at := range tables {
				checkAsync(t, wtxn, at.tbl, at.indexes, cur[k], where+" (in the WriteTxn)")
			}
		}
		if rng.IntN(6) == 0 {
			wtxn.Abort()
			where += " (aborted)"
		} else {
			rtxn := wtxn.Commit()
			for k, at := range tables {
				at.m = cur[k]
				checkAsync(t, rtxn, at.tbl, at.indexes, at.m, where+" (the committed txn)")
			}
		}
		for _, at := range tables {
			checkAsync(t, db.ReadTxn(), at.tbl, at.indexes, at.m, where)
		}
		// The trees the replays wrote were the transaction's own: the
		// snapshot from before it reads as it did.
		for k, at := range tables {
			checkAsync(t, before, at.tbl, at.indexes, prev[k], where+" (the snapshot from before)")
		}
		for _, at := range tables {
			checkAsyncChanges(t, db, at, where)
		}
	}
	if started == 0 {
		t.Fatal("no replay ran beside the writer: the test tested nothing")
	}
}

// checkAsyncChanges adds the changes since the last call to at.seen and
// compares them with the model.
func checkAsyncChanges(t *testing.T, db *DB, at *asyncTable, where string) {
	t.Helper()
	seq, _ := at.it.Next(db.ReadTxn())
	var last Revision
	for c, rev := range seq {
		if rev <= last || rev != c.Revision {
			t.Fatalf("%s: table %s: change of %d at revision %d (yielded %d) after %d", where, at.tbl.Name(), c.Object.ID, c.Revision, rev, last)
		}
		last = rev
		if c.Deleted {
			delete(at.seen, c.Object.ID)
		} else {
			at.seen[c.Object.ID] = asyncEntry{c.Object, c.Revision}
		}
	}
	got, want := slices.Collect(maps.Values(at.seen)), at.m.sorted(asyncByID)
	slices.SortFunc(got, asyncByID)
	if !sameAsync(got, want) {
		t.Fatalf("%s: table %s: the changes add up to %s", where, at.tbl.Name(), asyncDiff(got, want))
	}
}
