package statedb

import (
	"fmt"
	"iter"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"
)

// Change feed model: change iterators registered at different times under
// random writes, each reading at random moments; every iterator's view (its
// yielded changes applied to a map) must equal the table as of the ReadTxn it
// passed to Next. Size: STATEDB_MODEL_OPS steps (default 4000).

// iterView is one change iterator and what it has seen.
type iterView struct {
	name    string
	it      ChangeIterator[*testObject]
	view    map[uint64]modelEntry
	lastRev Revision // highest revision yielded so far
	// lastTxn is the ReadTxn passed to the latest Next.
	lastTxn ReadTxn
	// pending is a Next whose changes have not been iterated yet: they are
	// fixed when Next is called and must not depend on later commits.
	pending *pendingNext
}

type pendingNext struct {
	seq   iter.Seq2[Change[*testObject], Revision]
	txn   ReadTxn
	watch <-chan struct{}
}

func newIterView(t *testing.T, name string, tbl RWTable[*testObject], wtxn WriteTxn) *iterView {
	t.Helper()
	it, err := tbl.Changes(wtxn)
	if err != nil {
		t.Fatalf("Changes: %v", err)
	}
	return &iterView{name: name, it: it, view: map[uint64]modelEntry{}}
}

// next calls Next with txn and returns it as pending.
func (v *iterView) next(txn ReadTxn) *pendingNext {
	seq, watch := v.it.Next(txn)
	v.lastTxn = txn
	return &pendingNext{seq: seq, txn: txn, watch: watch}
}

// consume applies the changes of p to the view and checks them: revisions
// strictly increase within and across calls, each object at most once per
// call, deleted objects are the versions that were deleted, and afterwards
// the view equals the table as of p.txn.
func (v *iterView) consume(t *testing.T, tbl Table[*testObject], p *pendingNext, deletedAt map[Revision]*testObject) int {
	t.Helper()
	upTo := tbl.Revision(p.txn)
	ids := map[uint64]bool{}
	n := 0
	for c, rev := range p.seq {
		n++
		id := c.Object.ID
		switch {
		case rev != c.Revision:
			t.Fatalf("%s: change yielded with revision %d, Change.Revision %d", v.name, rev, c.Revision)
		case rev <= v.lastRev:
			t.Fatalf("%s: revision %d (object %d deleted=%v) after revision %d: not strictly increasing", v.name, rev, id, c.Deleted, v.lastRev)
		case rev > upTo:
			t.Fatalf("%s: revision %d beyond the ReadTxn's table revision %d", v.name, rev, upTo)
		case ids[id]:
			t.Fatalf("%s: object %d yielded twice in one Next", v.name, id)
		}
		ids[id] = true
		v.lastRev = rev
		if c.Deleted {
			if want := deletedAt[rev]; want == nil || c.Object != want {
				t.Fatalf("%s: delete of object %d at revision %d: got %p, want the deleted version %p", v.name, id, rev, c.Object, want)
			}
			delete(v.view, id)
		} else {
			v.view[id] = modelEntry{obj: c.Object, rev: rev}
		}
	}
	var view tableModel
	view.objs = v.view
	if got, want := view.sorted(byID), collect(tbl.All(p.txn)); !equalEntries(got, want) {
		t.Fatalf("%s: view after Next = [%s], table as of its ReadTxn = [%s]", v.name, entriesString(got), entriesString(want))
	}
	return n
}

// graveyardEntries returns the delete revisions held in the graveyard.
func graveyardEntries(db *DB, tbl TableMeta) (revs []Revision, pks [][]byte) {
	e := db.ReadTxn().tableEntry(tbl)
	it := e.indexes[tbl.meta().graveyardRevisionIndex()].Root().Iterator()
	for _, o, ok := it.Next(); ok; _, o, ok = it.Next() {
		revs = append(revs, o.revision)
		pks = append(pks, e.meta.primaryKeyOf(o))
	}
	return revs, pks
}

// checkGraveyard checks that the graveyard holds only deleted objects that
// some registered iterator has not passed yet (it is collected at each commit
// that changes the table).
func checkGraveyard(t *testing.T, db *DB, tbl RWTable[*testObject], iters []*iterView, where string) {
	t.Helper()
	low := Revision(1<<64 - 1)
	for _, v := range iters {
		low = min(low, v.it.(*changeIterator[*testObject]).tracker.position.Load())
	}
	revs, pks := graveyardEntries(db, tbl)
	if n := graveyardLen(db, tbl); n != len(revs) {
		t.Fatalf("%s: graveyard indexes disagree: %d by key, %d by revision", where, n, len(revs))
	}
	for i, rev := range revs {
		if rev < low {
			t.Fatalf("%s: graveyard keeps a delete at revision %d that every iterator has passed (lowest position %d)", where, rev, low)
		}
		if _, _, found := tbl.Get(db.ReadTxn(), Query[*testObject]{index: "id", key: pks[i]}); found {
			t.Fatalf("%s: graveyard keeps key %x that is alive", where, pks[i])
		}
	}
}

func TestChangesModel(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	steps := envInt(t, "STATEDB_MODEL_OPS", 4000)

	db, tbl := newTestTable(t, "objs", tagIndex)
	// Writes to another table must not disturb the iterators.
	other, err := NewTable(db, "other", idIndex)
	if err != nil {
		t.Fatal(err)
	}
	model := newTableModel()
	deletedAt := map[Revision]*testObject{}
	var iters []*iterView
	nextName := 0
	yielded := 0

	for step := range steps {
		where := fmt.Sprintf("step %d", step)
		switch r := rng.IntN(100); {
		case r < 45:
			// A write transaction, sometimes registering an iterator.
			wtxn := db.WriteTxn(tbl)
			working := model.clone()
			dels := map[Revision]*testObject{}
			register := len(iters) < 6 && rng.IntN(8) == 0
			var registered *iterView
			for i := range 1 + rng.IntN(6) {
				if register && registered == nil && rng.IntN(3) == 0 {
					registered = newIterView(t, fmt.Sprintf("iterator %d (registered at step %d)", nextName, step), tbl, wtxn)
				}
				id := uint64(rng.IntN(modelIDs))
				switch op := rng.IntN(20); {
				case op < 9:
					obj := randObject(rng, id)
					obj.Name = ""
					if _, _, err := tbl.Insert(wtxn, obj); err != nil {
						t.Fatal(err)
					}
					working.put(obj)
				case op < 19:
					if old, had, _ := tbl.Delete(wtxn, &testObject{ID: id}); had {
						working.del(id)
						dels[working.rev] = old
					}
				case i == 0 && rng.IntN(4) == 0:
					for _, e := range working.sorted(byID) {
						working.del(e.obj.ID)
						dels[working.rev] = e.obj
					}
					if err := tbl.DeleteAll(wtxn); err != nil {
						t.Fatal(err)
					}
				}
			}
			if register && registered == nil {
				registered = newIterView(t, fmt.Sprintf("iterator %d (registered at step %d)", nextName, step), tbl, wtxn)
			}
			if registered != nil {
				nextName++
				iters = append(iters, registered)
			}
			if rng.IntN(10) == 0 {
				// The registration survives Abort (see Changes).
				wtxn.Abort()
			} else {
				wtxn.Commit()
				model = working
				for rev, o := range dels {
					deletedAt[rev] = o
				}
				checkGraveyard(t, db, tbl, iters, where)
			}

		case r < 50:
			wtxn := db.WriteTxn(other)
			other.Insert(wtxn, &testObject{ID: uint64(rng.IntN(4))})
			wtxn.Commit()

		case r < 53 && len(iters) > 0:
			// Close an iterator; later Next calls yield nothing.
			i := rng.IntN(len(iters))
			v := iters[i]
			v.it.Close()
			v.it.Close() // idempotent
			iters = slices.Delete(iters, i, i+1)
			seq, watch := v.it.Next(db.ReadTxn())
			for c := range seq {
				t.Fatalf("%s: Next after Close yielded %+v", v.name, c)
			}
			select {
			case <-watch:
			default:
				t.Fatalf("%s: Next after Close returned an open watch channel", v.name)
			}

		case len(iters) > 0:
			v := iters[rng.IntN(len(iters))]
			if v.pending != nil {
				yielded += v.consume(t, tbl, v.pending, deletedAt)
				v.pending = nil
				continue
			}
			if v.lastTxn != nil && rng.IntN(10) == 0 {
				// Next with the ReadTxn it has already read yields
				// nothing.
				for c := range v.next(v.lastTxn).seq {
					t.Fatalf("%s: Next with the same ReadTxn again yielded %+v", v.name, c)
				}
				continue
			}
			p := v.next(db.ReadTxn())
			if rng.IntN(3) == 0 {
				v.pending = p // iterate it after later commits
			} else {
				yielded += v.consume(t, tbl, p, deletedAt)
			}
		}
	}

	// Once every iterator has read the latest state, nothing is kept.
	for _, v := range iters {
		if v.pending != nil {
			v.consume(t, tbl, v.pending, deletedAt)
		}
		v.consume(t, tbl, v.next(db.ReadTxn()), deletedAt)
	}
	if n := graveyardLen(db, tbl); n != 0 {
		revs, _ := graveyardEntries(db, tbl)
		t.Fatalf("graveyard holds %d deleted objects (revisions %v) after every iterator read the latest state", n, revs)
	}
	for _, v := range iters {
		v.it.Close()
	}
	t.Logf("%d steps, %d iterators at the end, %d changes yielded, table revision %d", steps, len(iters), yielded, model.rev)
}

// TestChangesFirstNext: the first Next yields every object present as an
// insert, and the watch channel closes on a later commit to the table only.
func TestChangesFirstNextAndWatch(t *testing.T) {
	db, tbl := newTestTable(t, "objs")
	other, err := NewTable(db, "other", idIndex)
	if err != nil {
		t.Fatal(err)
	}
	wtxn := db.WriteTxn(tbl)
	for i := range uint64(5) {
		tbl.Insert(wtxn, &testObject{ID: i})
	}
	tbl.Delete(wtxn, &testObject{ID: 3})
	it, err := tbl.Changes(wtxn)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	wtxn.Commit()

	seq, watch := it.Next(db.ReadTxn())
	var got []uint64
	for c := range seq {
		if c.Deleted {
			t.Fatalf("first Next yielded a delete: %+v", c)
		}
		got = append(got, c.Object.ID)
	}
	if !slices.Equal(got, []uint64{0, 1, 2, 4}) {
		t.Fatalf("first Next yielded %v, want [0 1 2 4]", got)
	}

	wtxn = db.WriteTxn(other)
	other.Insert(wtxn, &testObject{ID: 1})
	wtxn.Commit()
	select {
	case <-watch:
		t.Fatal("Next's watch channel closed by a commit to another table")
	default:
	}

	wtxn = db.WriteTxn(tbl)
	tbl.Delete(wtxn, &testObject{ID: 0})
	wtxn.Commit()
	select {
	case <-watch:
	case <-time.After(5 * time.Second):
		t.Fatal("Next's watch channel not closed by a commit to the table")
	}
	seq, _ = it.Next(db.ReadTxn())
	var changes []Change[*testObject]
	for c := range seq {
		changes = append(changes, c)
	}
	if len(changes) != 1 || !changes[0].Deleted || changes[0].Object.ID != 0 || changes[0].Revision != 7 {
		t.Fatalf("second Next = %+v, want the delete of 0 at revision 7", changes)
	}
	if _, err := tbl.Changes(wtxn); err == nil {
		t.Fatal("Changes with a committed WriteTxn succeeded")
	}
}

// TestChangesNoDeleteLost deletes many objects, in many commits, while an
// iterator is not reading; its next Next yields every delete.
func TestChangesNoDeleteLost(t *testing.T) {
	const n = 2000
	db, tbl := newTestTable(t, "objs", tagIndex)
	wtxn := db.WriteTxn(tbl)
	it, _ := tbl.Changes(wtxn)
	defer it.Close()
	for i := range uint64(n) {
		tbl.Insert(wtxn, &testObject{ID: i, Tags: []string{"x"}})
	}
	wtxn.Commit()
	seq, _ := it.Next(db.ReadTxn())
	count := 0
	for range seq {
		count++
	}
	if count != n {
		t.Fatalf("first Next yielded %d objects, want %d", count, n)
	}

	// Delete everything: one by one, in batches, and the rest with
	// DeleteAll; re-insert and delete some again on the way.
	for i := uint64(0); i < n/2; i += 1 + i%7 {
		wtxn := db.WriteTxn(tbl)
		for j := i; j < min(i+1+i%7, n/2); j++ {
			tbl.Delete(wtxn, &testObject{ID: j})
		}
		if i%5 == 0 {
			tbl.Insert(wtxn, &testObject{ID: n + i}) // inserted and later deleted: net nothing
		}
		wtxn.Commit()
	}
	wtxn = db.WriteTxn(tbl)
	tbl.DeleteAll(wtxn)
	wtxn.Commit()
	if g := graveyardLen(db, tbl); g < n {
		t.Fatalf("graveyard holds %d deletes, want at least %d", g, n)
	}

	seq, _ = it.Next(db.ReadTxn())
	deleted := map[uint64]bool{}
	var last Revision
	for c, rev := range seq {
		if !c.Deleted {
			t.Fatalf("unexpected insert %+v", c)
		}
		if rev <= last {
			t.Fatalf("revision %d after %d", rev, last)
		}
		last = rev
		deleted[c.Object.ID] = true
	}
	for i := range uint64(n) {
		if !deleted[i] {
			t.Fatalf("delete of object %d was lost (%d deletes yielded)", i, len(deleted))
		}
	}
	if g := graveyardLen(db, tbl); g != 0 {
		t.Fatalf("graveyard holds %d deletes after the only iterator read them", g)
	}
}

// TestChangesGraveyard checks when deleted objects are kept and freed.
func TestChangesGraveyard(t *testing.T) {
	db, tbl := newTestTable(t, "objs")
	write := func(ins []uint64, dels []uint64) {
		t.Helper()
		wtxn := db.WriteTxn(tbl)
		for _, id := range ins {
			tbl.Insert(wtxn, &testObject{ID: id})
		}
		for _, id := range dels {
			tbl.Delete(wtxn, &testObject{ID: id})
		}
		wtxn.Commit()
	}
	drain := func(it ChangeIterator[*testObject]) {
		seq, _ := it.Next(db.ReadTxn())
		for range seq {
		}
	}
	wantGraveyard := func(n int, what string) {
		t.Helper()
		if got := graveyardLen(db, tbl); got != n {
			t.Fatalf("%s: graveyard holds %d, want %d", what, got, n)
		}
	}

	write([]uint64{1, 2, 3, 4, 5, 6}, nil)
	write(nil, []uint64{1})
	wantGraveyard(0, "no iterator registered")

	wtxn := db.WriteTxn(tbl)
	a, _ := tbl.Changes(wtxn)
	b, _ := tbl.Changes(wtxn)
	wtxn.Commit()
	drain(a)
	drain(b)
	write(nil, []uint64{2})
	wantGraveyard(1, "a delete not yet seen")
	drain(a)
	wantGraveyard(1, "a delete seen by one of two iterators")
	drain(b)
	wantGraveyard(0, "a delete seen by both iterators")

	// A re-inserted object leaves the graveyard at once.
	write(nil, []uint64{3})
	write([]uint64{3}, nil)
	wantGraveyard(0, "deleted and re-inserted")

	// A writer holds the table while the iterator reads: the writer's
	// commit frees what the iterator has passed, even if it wrote nothing
	// to the table.
	write(nil, []uint64{3})
	wtxn = db.WriteTxn(tbl)
	drain(a)
	drain(b)
	wtxn.Commit()
	wantGraveyard(0, "both iterators read while a writer held the table, then it committed")

	// Closing the iterator that is behind frees what only it needed.
	write(nil, []uint64{4})
	drain(a)
	wantGraveyard(1, "b has not seen the delete")
	b.Close()
	wantGraveyard(0, "b closed, a has seen the delete")

	// Closing the last iterator frees everything.
	write(nil, []uint64{5})
	wantGraveyard(1, "a has not seen the delete")
	a.Close()
	wantGraveyard(0, "every iterator closed")
	write(nil, []uint64{6})
	wantGraveyard(0, "no iterator registered any more")
}

// TestChangesIteratorGC: an iterator dropped without Close is unregistered
// when it is garbage collected, and deletes are then no longer kept.
func TestChangesIteratorGC(t *testing.T) {
	db, tbl := newTestTable(t, "objs")
	func() {
		wtxn := db.WriteTxn(tbl)
		for i := range uint64(10) {
			tbl.Insert(wtxn, &testObject{ID: i})
		}
		it, err := tbl.Changes(wtxn)
		if err != nil {
			t.Fatal(err)
		}
		wtxn.Commit()
		seq, _ := it.Next(db.ReadTxn())
		for range seq {
		}
		// it is dropped here without Close.
	}()
	wtxn := db.WriteTxn(tbl)
	tbl.Delete(wtxn, &testObject{ID: 0})
	wtxn.Commit()
	if g := graveyardLen(db, tbl); g != 1 {
		t.Fatalf("graveyard holds %d, want 1 while the iterator is registered", g)
	}

	deadline := time.Now().Add(10 * time.Second)
	for tbl.meta().trackers.count.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("dropped change iterator still registered after GC")
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	for i := range uint64(5) {
		wtxn := db.WriteTxn(tbl)
		tbl.Delete(wtxn, &testObject{ID: 1 + i})
		wtxn.Commit()
		if g := graveyardLen(db, tbl); g != 0 {
			t.Fatalf("graveyard holds %d after the iterator was collected, want 0", g)
		}
	}
}

// TestChangesNextWithAbortedWriteTxn: Next accepts any ReadTxn, and a
// WriteTxn is one. Given an open WriteTxn, Next must not yield its
// uncommitted writes: if that WriteTxn is then aborted, the next commit
// reuses those revisions and the iterator would never see its changes. Next
// reads the WriteTxn's committed snapshot instead.
func TestChangesNextWithAbortedWriteTxn(t *testing.T) {
	db, tbl := newTestTable(t, "objs")
	wtxn := db.WriteTxn(tbl)
	it, _ := tbl.Changes(wtxn)
	defer it.Close()
	tbl.Insert(wtxn, &testObject{ID: 1})
	wtxn.Commit()
	seq, _ := it.Next(db.ReadTxn())
	for range seq {
	}

	wtxn = db.WriteTxn(tbl)
	tbl.Insert(wtxn, &testObject{ID: 2}) // revision 2, never committed
	seq, _ = it.Next(wtxn)
	for range seq {
	}
	wtxn.Abort()

	wtxn = db.WriteTxn(tbl)
	tbl.Insert(wtxn, &testObject{ID: 3}) // revision 2 again
	wtxn.Commit()
	seq, _ = it.Next(db.ReadTxn())
	var got []uint64
	for c := range seq {
		got = append(got, c.Object.ID)
	}
	if !slices.Equal(got, []uint64{3}) {
		t.Fatalf("Next after the aborted WriteTxn yielded %v, want [3]: the insert of 3 was lost", got)
	}
}

// TestChangesFirstNextWithOlderReadTxn gives the first Next a snapshot
// taken before the iterator was registered, with a delete in between that
// the iterator could not keep: the delete must not be lost.
func TestChangesFirstNextWithOlderReadTxn(t *testing.T) {
	db, tbl := newTestTable(t, "objs")
	wtxn := db.WriteTxn(tbl)
	for i := range uint64(3) {
		tbl.Insert(wtxn, &testObject{ID: i})
	}
	wtxn.Commit()
	old := db.ReadTxn()

	wtxn = db.WriteTxn(tbl)
	tbl.Delete(wtxn, &testObject{ID: 1}) // no iterator yet: not kept
	wtxn.Commit()

	wtxn = db.WriteTxn(tbl)
	it, err := tbl.Changes(wtxn)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	wtxn.Commit()

	// The iterator's view: what it yields, applied to an empty map.
	view := map[uint64]bool{}
	apply := func(txn ReadTxn) {
		seq, _ := it.Next(txn)
		for c := range seq {
			if c.Deleted {
				delete(view, c.Object.ID)
			} else {
				view[c.Object.ID] = true
			}
		}
	}
	apply(old)
	apply(db.ReadTxn())
	if len(view) != 2 || !view[0] || !view[2] {
		t.Fatalf("iterator's view = %v, want {0, 2}: the delete of 1 was lost", view)
	}
}
