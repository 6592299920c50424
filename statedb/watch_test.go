package statedb

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steadystate/steadystate/index"
)

// isClosed reports whether ch is closed. Commit closes watch channels before
// it returns, so no waiting is needed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// watchCase is a watch channel taken before a commit and whether the commit
// must close it.
type watchCase struct {
	what  string
	take  func(txn ReadTxn) <-chan struct{}
	write func(t *testing.T, wtxn WriteTxn)
}

// watchCases returns the watch cases on the table *tp. Before each case the
// table holds 1 (a1, tags x y), 2 (a2, tag x) and 3 (b3, no tags), written
// at revisions 1, 2 and 3 (see newWatchTable).
func watchCases(tp *RWTable[*testObject]) []watchCase {
	obj := func(id uint64, name string, tags ...string) *testObject {
		return &testObject{ID: id, Name: name, Tags: tags}
	}
	insert := func(o *testObject) func(*testing.T, WriteTxn) {
		return func(t *testing.T, wtxn WriteTxn) {
			if _, _, err := (*tp).Insert(wtxn, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	del := func(id uint64) func(*testing.T, WriteTxn) {
		return func(t *testing.T, wtxn WriteTxn) {
			if _, had, err := (*tp).Delete(wtxn, &testObject{ID: id}); err != nil || !had {
				t.Fatalf("Delete(%d): had=%v err=%v", id, had, err)
			}
		}
	}
	get := func(q Query[*testObject]) func(ReadTxn) <-chan struct{} {
		return func(txn ReadTxn) <-chan struct{} { _, _, ch, _ := (*tp).GetWatch(txn, q); return ch }
	}
	list := func(q Query[*testObject]) func(ReadTxn) <-chan struct{} {
		return func(txn ReadTxn) <-chan struct{} { _, ch := (*tp).ListWatch(txn, q); return ch }
	}
	prefix := func(q Query[*testObject]) func(ReadTxn) <-chan struct{} {
		return func(txn ReadTxn) <-chan struct{} { _, ch := (*tp).PrefixWatch(txn, q); return ch }
	}
	all := func(txn ReadTxn) <-chan struct{} { _, ch := (*tp).AllWatch(txn); return ch }
	lowerBound := func(txn ReadTxn) <-chan struct{} {
		_, ch := (*tp).LowerBoundWatch(txn, ByRevision[*testObject](0))
		return ch
	}

	lowerBoundName := func(txn ReadTxn) <-chan struct{} {
		_, ch := (*tp).LowerBoundWatch(txn, nameIndex.Query("b"))
		return ch
	}
	lowerBoundTags := func(txn ReadTxn) <-chan struct{} {
		_, ch := (*tp).LowerBoundWatch(txn, tagIndex.Query("y"))
		return ch
	}
	return []watchCase{
		{"GetWatch(id 1) on replace", get(idIndex.Query(1)), insert(obj(1, "a1", "x"))},
		{"GetWatch(id 1) on delete", get(idIndex.Query(1)), del(1)},
		{"GetWatch(id 7) of a missing key on insert", get(idIndex.Query(7)), insert(obj(7, "z"))},
		{"GetWatch(id 1000) of a missing key on insert", get(idIndex.Query(1000)), insert(obj(1000, "z"))},
		{"GetWatch(name a2) on replace", get(nameIndex.Query("a2")), insert(obj(2, "a2"))},
		{"GetWatch(name a2) on rename", get(nameIndex.Query("a2")), insert(obj(2, "c2"))},
		{"GetWatch(name a9) of a missing key on insert", get(nameIndex.Query("a9")), insert(obj(9, "a9"))},
		{"GetWatch(tags y) on a new object with the tag", get(tagIndex.Query("y")), insert(obj(8, "z", "y"))},
		{"GetWatch(tags w) of a missing key on insert", get(tagIndex.Query("w")), insert(obj(8, "z", "w"))},
		{"ListWatch(tags x) on removal of the tag", list(tagIndex.Query("x")), insert(obj(2, "a2"))},
		{"ListWatch(tags x) on delete", list(tagIndex.Query("x")), del(1)},
		{"ListWatch(tags x) on a new object", list(tagIndex.Query("x")), insert(obj(5, "z", "x"))},
		{"ListWatch(tags w) of a missing key on insert", list(tagIndex.Query("w")), insert(obj(5, "z", "w"))},
		{"ListWatch(name b3) on delete", list(nameIndex.Query("b3")), del(3)},
		{"PrefixWatch(name a) on insert under it", prefix(nameIndex.Query("a")), insert(obj(5, "a5"))},
		{"PrefixWatch(name a) on delete under it", prefix(nameIndex.Query("a")), del(2)},
		{"PrefixWatch(name a) on replace under it", prefix(nameIndex.Query("a")), insert(obj(1, "a1"))},
		{"PrefixWatch(tags x) on a longer tag", prefix(tagIndex.Query("x")), insert(obj(5, "z", "xx"))},
		{"PrefixWatch(tags q) of a missing prefix on insert", prefix(tagIndex.Query("q")), insert(obj(5, "z", "qq"))},
		{"PrefixWatch(id) on any insert", prefix(Query[*testObject]{index: "id"}), insert(obj(5, "z"))},
		{"AllWatch on insert", all, insert(obj(5, "z"))},
		{"AllWatch on replace", all, insert(obj(3, "b3"))},
		{"AllWatch on delete", all, del(3)},
		{"AllWatch on DeleteAll", all, func(t *testing.T, wtxn WriteTxn) { (*tp).DeleteAll(wtxn) }},
		{"LowerBoundWatch(revision) on insert", lowerBound, insert(obj(5, "z"))},
		{"LowerBoundWatch(revision) on delete", lowerBound, del(1)},
		{"LowerBoundWatch(name b) on insert", lowerBoundName, insert(obj(5, "c5"))},
		{"LowerBoundWatch(tags y) on insert", lowerBoundTags, insert(obj(5, "z", "z"))},
		{"GetWatch(revision 3) on replace", get(Query[*testObject]{index: RevisionIndex, key: index.Uint64(3)}), insert(obj(3, "b3"))},
		{"GetWatch(revision 9) of a missing key on insert", get(Query[*testObject]{index: RevisionIndex, key: index.Uint64(9)}), insert(obj(5, "z"))},
	}
}

// newWatchTable returns a DB with the table of watchCases and an identical
// table "other", both holding the objects 1, 2 and 3.
func newWatchTable(t *testing.T) (db *DB, tbl, other RWTable[*testObject]) {
	t.Helper()
	db = New()
	var err error
	if tbl, err = NewTable(db, "objs", idIndex, tagIndex, nameIndex); err != nil {
		t.Fatal(err)
	}
	if other, err = NewTable(db, "other", idIndex, tagIndex, nameIndex); err != nil {
		t.Fatal(err)
	}
	wtxn := db.WriteTxn(tbl, other)
	for _, o := range []*testObject{
		{ID: 1, Name: "a1", Tags: []string{"x", "y"}},
		{ID: 2, Name: "a2", Tags: []string{"x"}},
		{ID: 3, Name: "b3"},
	} {
		tbl.Insert(wtxn, o)
		other.Insert(wtxn, o.clone())
	}
	wtxn.Commit()
	return db, tbl, other
}

func TestWatchChannels(t *testing.T) {
	var tbl RWTable[*testObject]
	cases := watchCases(&tbl)
	for _, tc := range cases {
		t.Run(tc.what, func(t *testing.T) {
			db, objs, other := newWatchTable(t)
			tbl = objs
			ch := tc.take(db.ReadTxn())
			if isClosed(ch) {
				t.Fatal("closed before any commit")
			}
			// A commit to a different table leaves it open, even one that
			// does the same to an identical table.
			wtxn := db.WriteTxn(other)
			saved := tbl
			tbl = other
			tc.write(t, wtxn)
			tbl = saved
			wtxn.Commit()
			if isClosed(ch) {
				t.Fatal("closed by a commit to another table")
			}
			// An aborted write leaves it open.
			wtxn = db.WriteTxn(tbl)
			tc.write(t, wtxn)
			wtxn.Abort()
			if isClosed(ch) {
				t.Fatal("closed by an aborted WriteTxn")
			}
			wtxn = db.WriteTxn(tbl)
			tc.write(t, wtxn)
			if isClosed(ch) {
				t.Fatal("closed before Commit")
			}
			wtxn.Commit()
			if !isClosed(ch) {
				t.Fatal("not closed by the commit")
			}
			// A fresh channel is open again.
			if isClosed(tc.take(db.ReadTxn())) {
				t.Fatal("a channel taken after the commit is already closed")
			}
		})
	}
}

// TestWatchThroughWriteTxn takes each watch channel through an open
// WriteTxn, at different points of its writes, and checks that the
// transaction's Commit closes it when the writes after that point change
// what it watches: also when the transaction had already written the nodes
// the channel belongs to (they must not be changed in place afterwards).
func TestWatchThroughWriteTxn(t *testing.T) {
	var tbl RWTable[*testObject]
	cases := watchCases(&tbl)
	before := []struct {
		what  string
		write func(t *testing.T, wtxn WriteTxn)
	}{
		{"before any write", func(*testing.T, WriteTxn) {}},
		{"after an unrelated write", func(t *testing.T, wtxn WriteTxn) {
			if _, _, err := tbl.Insert(wtxn, &testObject{ID: 500, Name: "p500", Tags: []string{"p"}}); err != nil {
				t.Fatal(err)
			}
		}},
		{"after rewriting every object", func(t *testing.T, wtxn WriteTxn) {
			for o := range tbl.All(wtxn) {
				if _, _, err := tbl.Insert(wtxn, o.clone()); err != nil {
					t.Fatal(err)
				}
			}
		}},
	}
	for _, tc := range cases {
		for _, b := range before {
			t.Run(tc.what+"/"+b.what, func(t *testing.T) {
				db, objs, _ := newWatchTable(t)
				tbl = objs
				wtxn := db.WriteTxn(tbl)
				defer wtxn.Abort()
				b.write(t, wtxn)
				ch := tc.take(wtxn)
				tc.write(t, wtxn)
				if isClosed(ch) {
					t.Fatal("closed before Commit")
				}
				wtxn.Commit()
				if !isClosed(ch) {
					t.Fatal("not closed by the commit of the WriteTxn it was taken through")
				}
			})
		}
	}
}

func TestInitializers(t *testing.T) {
	db, tbl := newTestTable(t, "objs")
	commit := func(f func(WriteTxn)) {
		t.Helper()
		wtxn := db.WriteTxn(tbl)
		f(wtxn)
		wtxn.Commit()
	}
	wantInit := func(want bool, what string) <-chan struct{} {
		t.Helper()
		ok, ch := tbl.Initialized(db.ReadTxn())
		if ok != want || isClosed(ch) != want {
			t.Fatalf("%s: Initialized = %v, channel closed = %v, want %v", what, ok, isClosed(ch), want)
		}
		return ch
	}
	wantInit(true, "a table without initializers")

	var loader, api func(WriteTxn)
	commit(func(wtxn WriteTxn) {
		loader = tbl.RegisterInitializer(wtxn, "loader")
		api = tbl.RegisterInitializer(wtxn, "api")
	})
	ch := wantInit(false, "two initializers registered")

	commit(loader)
	wantInit(false, "one of two initializers done")
	commit(loader)
	wantInit(false, "the same initializer done twice")

	wtxn := db.WriteTxn(tbl)
	api(wtxn)
	if ok, _ := tbl.Initialized(wtxn); !ok {
		t.Fatal("the WriteTxn that finished the last initializer does not see it")
	}
	if isClosed(ch) {
		t.Fatal("Initialized channel closed before the last done was committed")
	}
	wantInit(false, "last initializer done but not committed")
	wtxn.Commit()
	if !isClosed(ch) {
		t.Fatal("Initialized channel not closed after the last done was committed")
	}
	wantInit(true, "every initializer done")
	commit(api)
	wantInit(true, "an initializer done again after initialization")

	// A done in a WriteTxn that is aborted does not count: it must be
	// called again, and then it counts.
	var late func(WriteTxn)
	commit(func(wtxn WriteTxn) { late = tbl.RegisterInitializer(wtxn, "late") })
	ch = wantInit(false, "a new initializer after initialization")
	wtxn = db.WriteTxn(tbl)
	late(wtxn)
	wtxn.Abort()
	wantInit(false, "the last done was aborted")
	commit(late)
	wantInit(true, "the last done called again and committed")
	if !isClosed(ch) {
		t.Fatal("Initialized channel not closed")
	}
}

// syncBuffer is a bytes.Buffer safe for the logger and the test to share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// dropWriteTxn opens a WriteTxn, writes and forgets it.
//
//go:noinline
func dropWriteTxn(db *DB, tbl RWTable[*testObject]) {
	wtxn := db.WriteTxn(tbl)
	tbl.Insert(wtxn, &testObject{ID: 42})
}

func TestDroppedWriteTxn(t *testing.T) {
	var logs syncBuffer
	db := New(WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	tbl, err := NewTable(db, "objs", idIndex)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewTable(db, "other", idIndex)
	if err != nil {
		t.Fatal(err)
	}
	dropWriteTxn(db, tbl)

	// Other tables are not blocked meanwhile.
	wtxn := db.WriteTxn(other)
	other.Insert(wtxn, &testObject{ID: 1})
	wtxn.Commit()

	acquired := make(chan WriteTxn, 1)
	go func() { acquired <- db.WriteTxn(tbl) }()
	deadline := time.After(10 * time.Second)
	for wtxn = nil; wtxn == nil; {
		select {
		case wtxn = <-acquired:
		case <-deadline:
			t.Fatal("the lock of a dropped WriteTxn was not released after GC")
		default:
			runtime.GC()
			time.Sleep(time.Millisecond)
		}
	}
	if _, _, found := tbl.Get(wtxn, idIndex.Query(42)); found {
		t.Fatal("the write of the dropped WriteTxn is visible")
	}
	tbl.Insert(wtxn, &testObject{ID: 43})
	wtxn.Commit()

	out := logs.String()
	for _, want := range []string{"dropped without Commit or Abort", "objs", "watch_test.go"} {
		if !strings.Contains(out, want) {
			t.Errorf("log does not contain %q:\n%s", want, out)
		}
	}
	if n := db.droppedTxns.Load(); n != 1 {
		t.Errorf("droppedTxns = %d, want 1", n)
	}

	// A finished WriteTxn that is garbage collected is not reported.
	logs.mu.Lock()
	logs.buf.Reset()
	logs.mu.Unlock()
	func() {
		wtxn := db.WriteTxn(tbl)
		tbl.Insert(wtxn, &testObject{ID: 44})
		wtxn.Commit()
		wtxn = db.WriteTxn(tbl)
		wtxn.Abort()
	}()
	for range 5 {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if out := logs.String(); out != "" {
		t.Errorf("finished WriteTxns reported:\n%s", out)
	}
	// The lock is free: the guard of a finished WriteTxn did not unlock
	// it a second time (that would be a fatal error) nor keep it.
	wtxn = db.WriteTxn(tbl)
	wtxn.Abort()
}

func TestNewTableErrors(t *testing.T) {
	nonUnique := idIndex
	nonUnique.Unique = false
	dupOfPrimary := tagIndex
	dupOfPrimary.Name = "id"
	reserved := tagIndex
	reserved.Name = "_revision"
	underscore := tagIndex
	underscore.Name = "_mine"
	badName := tagIndex
	badName.Name = "Tags"
	noFromObject := tagIndex
	noFromObject.FromObject = nil
	noFromKey := nameIndex
	noFromKey.FromKey = nil

	db := New()
	if _, err := NewTable(db, "taken", idIndex); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what      string
		name      string
		primary   Indexer[*testObject]
		secondary []Indexer[*testObject]
		want      error
	}{
		{"upper case table name", "Objs", idIndex, nil, ErrInvalidTableName},
		{"empty table name", "", idIndex, nil, ErrInvalidTableName},
		{"table name with a space", "my objs", idIndex, nil, ErrInvalidTableName},
		{"reserved table name", "_objs", idIndex, nil, ErrInvalidTableName},
		{"table name starting with a digit", "1objs", idIndex, nil, ErrInvalidTableName},
		{"table name too long", strings.Repeat("x", 65), idIndex, nil, ErrInvalidTableName},
		{"non-unique primary", "objs", nonUnique, nil, ErrInvalidIndex},
		{"secondary named like the primary", "objs", idIndex, []Indexer[*testObject]{dupOfPrimary}, ErrInvalidIndex},
		{"two secondaries of one name", "objs", idIndex, []Indexer[*testObject]{tagIndex, tagIndex}, ErrInvalidIndex},
		{"reserved index name _revision", "objs", idIndex, []Indexer[*testObject]{reserved}, ErrInvalidIndex},
		{"reserved index name _mine", "objs", idIndex, []Indexer[*testObject]{underscore}, ErrInvalidIndex},
		{"invalid index name", "objs", idIndex, []Indexer[*testObject]{badName}, ErrInvalidIndex},
		{"index without FromObject", "objs", idIndex, []Indexer[*testObject]{noFromObject}, ErrInvalidIndex},
		{"index without FromKey", "objs", idIndex, []Indexer[*testObject]{noFromKey}, ErrInvalidIndex},
		{"nil primary", "objs", nil, nil, ErrInvalidIndex},
		{"duplicate table", "taken", idIndex, nil, ErrDuplicateTable},
	} {
		t.Run(tc.what, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("NewTable panicked: %v", r)
					}
				}()
				_, err = NewTable(db, tc.name, tc.primary, tc.secondary...)
			}()
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.name)) {
				t.Fatalf("error %q does not name the table %q", err, tc.name)
			}
		})
	}
	// Failed NewTable calls register nothing: the name is still free.
	if n := len(db.Tables()); n != 1 {
		t.Fatalf("db has %d tables after failed NewTable calls, want 1", n)
	}
	if _, err := NewTable(db, "objs", idIndex, tagIndex, nameIndex); err != nil {
		t.Fatalf("NewTable after failed attempts with the same name: %v", err)
	}
}

func TestInsertStoredPointerPanics(t *testing.T) {
	db, tbl := newTestTable(t, "objs", nameIndex)
	o := &testObject{ID: 1, Name: "a"}
	wtxn := db.WriteTxn(tbl)
	tbl.Insert(wtxn, o)
	wtxn.Commit()

	for _, tc := range []struct {
		what  string
		write func(wtxn WriteTxn)
	}{
		{"Insert of the committed object", func(wtxn WriteTxn) { tbl.Insert(wtxn, o) }},
		{"CompareAndSwap of the committed object", func(wtxn WriteTxn) { tbl.CompareAndSwap(wtxn, 1, o) }},
		{"second Insert in one WriteTxn", func(wtxn WriteTxn) {
			n := &testObject{ID: 2, Name: "b"}
			tbl.Insert(wtxn, n)
			tbl.Insert(wtxn, n)
		}},
	} {
		t.Run(tc.what, func(t *testing.T) {
			wtxn := db.WriteTxn(tbl)
			defer wtxn.Abort()
			msg := func() (msg string) {
				defer func() { msg = fmt.Sprint(recover()) }()
				tc.write(wtxn)
				return "<no panic>"
			}()
			for _, want := range []string{`"objs"`, "already stored", "clone"} {
				if !strings.Contains(msg, want) {
					t.Fatalf("panic %q does not contain %q", msg, want)
				}
			}
		})
	}
	// The panicking transactions were aborted: nothing changed.
	if got, rev, _ := tbl.Get(db.ReadTxn(), idIndex.Query(1)); got != o || rev != 1 || tbl.NumObjects(db.ReadTxn()) != 1 {
		t.Fatalf("table changed by panicking transactions: %v@%d", got, rev)
	}
	// A clone is fine.
	wtxn = db.WriteTxn(tbl)
	if _, _, err := tbl.Insert(wtxn, o.clone()); err != nil {
		t.Fatal(err)
	}
	wtxn.Commit()
}

func TestQueryOfUnknownIndexPanics(t *testing.T) {
	db, tbl := newTestTable(t, "objs")
	defer func() {
		msg := fmt.Sprint(recover())
		if !strings.Contains(msg, `"tags"`) || !strings.Contains(msg, `"objs"`) {
			t.Fatalf("panic %q does not name the index and the table", msg)
		}
	}()
	tbl.Get(db.ReadTxn(), tagIndex.Query("x"))
}

// TestFinishedWriteTxnReads: a committed WriteTxn reads as what it
// committed, an aborted one as the state it started from; a ReadTxn of
// another DB is a clear panic, not a silent read of the wrong table.
func TestFinishedWriteTxnReads(t *testing.T) {
	db, a := newTestTable(t, "a")
	b, err := NewTable(db, "b", idIndex)
	if err != nil {
		t.Fatal(err)
	}
	wtxn := db.WriteTxn(a)
	it, _ := a.Changes(wtxn)
	defer it.Close()
	a.Insert(wtxn, &testObject{ID: 1})
	wtxn.Commit()
	if n := a.NumObjects(wtxn); n != 1 {
		t.Fatalf("committed txn sees %d objects, want 1", n)
	}
	if n := b.NumObjects(wtxn); n != 0 {
		t.Fatalf("unlocked table through committed txn: %d objects", n)
	}
	seq, _ := it.Next(wtxn)
	count := 0
	for range seq {
		count++
	}
	if count != 1 {
		t.Fatalf("Next(committed txn) yielded %d changes, want 1", count)
	}

	aborted := db.WriteTxn(a)
	a.Insert(aborted, &testObject{ID: 2})
	aborted.Abort()
	if n := a.NumObjects(aborted); n != 1 {
		t.Fatalf("aborted txn sees %d objects, want 1 (its start state)", n)
	}
	if n := b.NumObjects(aborted); n != 0 {
		t.Fatalf("unlocked table through aborted txn: %d objects", n)
	}

	other := New()
	if _, err := NewTable(other, "a", idIndex); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "another DB") {
			t.Fatalf("reading with another DB's ReadTxn: recovered %v", r)
		}
	}()
	a.NumObjects(other.ReadTxn())
}

// TestInitializedChannelAcrossReRegistration: in one transaction the last
// initializer finishes and a new one is registered. A channel taken before
// must close once the new one is done too.
func TestInitializedChannelAcrossReRegistration(t *testing.T) {
	db, tbl := newTestTable(t, "objs")
	wtxn := db.WriteTxn(tbl)
	doneA := tbl.RegisterInitializer(wtxn, "a")
	wtxn.Commit()
	_, ch := tbl.Initialized(db.ReadTxn())

	wtxn = db.WriteTxn(tbl)
	doneA(wtxn)
	doneB := tbl.RegisterInitializer(wtxn, "b")
	wtxn.Commit()
	if ok, _ := tbl.Initialized(db.ReadTxn()); ok {
		t.Fatal("initialized while b is pending")
	}
	if isClosed(ch) {
		t.Fatal("closed while b is pending")
	}
	wtxn = db.WriteTxn(tbl)
	doneB(wtxn)
	wtxn.Commit()
	if !isClosed(ch) {
		t.Fatal("the channel taken while a was pending never closes")
	}
	if ok, ch2 := tbl.Initialized(db.ReadTxn()); !ok || !isClosed(ch2) {
		t.Fatal("not initialized after b is done")
	}
}
