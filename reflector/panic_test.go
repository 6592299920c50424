package reflector_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reflector"
	"github.com/steadystate/steadystate/statedb"
)

// A panic in user code in the middle of a Multi's commit, here an index's
// FromObject on the delete of an object (the first event of the batch) and
// then on the relist of the next Run: each time the write transaction is
// aborted and the reflector's memory of every table rolled back, so the
// tables and Revision stay as they were; a Run without the panic then
// converges, with no lost delete (the key whose delete panicked, twice, is
// deleted) and no lost write of another table of the same revision.
func TestPanicInIndexMidCommit(t *testing.T) {
	f := newPanicFixture(t, nil, nil)
	src, m, armed := f.src, f.m, &f.armed
	change := func(ops ...mop) { src.commit(ops) }
	contents, run, waitFor := f.contents, f.run, f.waitFor
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	change(mop{tk: tk{"ta", "a"}, val: 666}, mop{tk: tk{"ta", "keep"}, val: 1}, mop{tk: tk{"tb", "b"}, val: 1})
	first := run(ctx)
	before := map[tk]int{{"ta", "a"}: 666, {"ta", "keep"}: 1, {"tb", "b"}: 1}
	waitFor(before, src.revision())
	listed := m.Revision()

	armed.Store(true)
	// One revision: a's delete (its index keys are computed: panic), and
	// writes to the other table.
	change(mop{tk: tk{"ta", "a"}, del: true}, mop{tk: tk{"tb", "b"}, val: 2}, mop{tk: tk{"tb", "new"}, val: 3})
	if p := <-first; p == nil || !strings.Contains(fmt.Sprint(p), "FromObject of a=666") {
		t.Fatalf("Run ended with %v, want the panic of FromObject", p)
	}
	if got := contents(); !maps.Equal(got, before) || m.Revision() != listed {
		t.Fatalf("after the panic: tables %v at Revision %d, want the list's %v at %d", got, m.Revision(), before, listed)
	}

	// Run again, still armed: the relist deletes a first, and panics.
	change(mop{tk: tk{"ta", "c"}, val: 4})
	if p := <-run(ctx); p == nil || !strings.Contains(fmt.Sprint(p), "FromObject of a=666") {
		t.Fatalf("the second Run ended with %v, want the panic of FromObject in the relist", p)
	}
	if got := contents(); !maps.Equal(got, before) || m.Revision() != listed {
		t.Fatalf("after the relist's panic: tables %v at Revision %d, want the list's %v at %d", got, m.Revision(), before, listed)
	}

	// Disarmed: converges, with a's delete.
	armed.Store(false)
	third := run(ctx)
	waitFor(map[tk]int{{"ta", "keep"}: 1, {"ta", "c"}: 4, {"tb", "b"}: 2, {"tb", "new"}: 3}, src.revision())
	change(mop{tk: tk{"tb", "b"}, del: true})
	waitFor(map[tk]int{{"ta", "keep"}: 1, {"ta", "c"}: 4, {"tb", "new"}: 3}, src.revision())
	cancel()
	if p := <-third; p != nil {
		t.Fatalf("the third Run panicked: %v", p)
	}
}

// panicFixture is a Multi of the tables ta and tb of one source, each with
// an index on the value whose FromObject panics for 666 while armed, on
// insert and on delete alike.
type panicFixture struct {
	t      *testing.T
	src    *multiSource
	db     *statedb.DB
	tables map[string]statedb.RWTable[*obj]
	m      *reflector.Multi[int]
	armed  atomic.Bool
}

// newPanicFixture makes the fixture with idle as the Multi's Idle; seed,
// if set, writes into the tables first.
func newPanicFixture(t *testing.T, idle <-chan struct{}, seed func(db *statedb.DB, tables map[string]statedb.RWTable[*obj])) *panicFixture {
	f := &panicFixture{t: t, src: newMultiSource(1), db: statedb.New(), tables: map[string]statedb.RWTable[*obj]{}}
	byValue := statedb.Index[*obj, int]{
		Name: "value",
		FromObject: func(o *obj) index.KeySet {
			if f.armed.Load() && o.Value == 666 {
				panic(fmt.Sprintf("FromObject of %s=666", o.Name))
			}
			return index.NewKeySet(index.Int(o.Value))
		},
		FromKey: index.Int,
	}
	var specs []reflector.TableSpec[int]
	for _, name := range []string{"ta", "tb"} {
		tbl, err := statedb.NewTable(f.db, name, nameIndex, byValue)
		if err != nil {
			t.Fatal(err)
		}
		f.tables[name] = tbl
		specs = append(specs, reflector.Into[int, *obj]{Table: name, Writer: objWriter(tbl),
			Transform: func(key string, v int) (*obj, error) { return &obj{Name: key, Value: v}, nil }})
	}
	if seed != nil {
		seed(f.db, f.tables)
	}
	var err error
	f.m, err = reflector.NewMulti(f.db, reflector.MultiConfig[int]{
		Name: "multi", Source: f.src, Tables: specs, Idle: idle,
		BatchSize: 1000, BatchInterval: time.Millisecond,
		RetryBackoffMin: time.Millisecond, RetryBackoffMax: time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// contents returns both tables' objects by table and name.
func (f *panicFixture) contents() map[tk]int {
	txn := f.db.ReadTxn()
	got := map[tk]int{}
	for name, tbl := range f.tables {
		for o := range tbl.All(txn) {
			got[tk{name, o.Name}] = o.Value
		}
	}
	return got
}

// run runs the Multi until ctx ends; the channel gets what it panicked
// with (nil if it returned).
func (f *panicFixture) run(ctx context.Context) <-chan any {
	ended := make(chan any, 1)
	go func() {
		defer func() { ended <- recover() }()
		f.m.Run(ctx)
	}()
	return ended
}

// waitFor waits (10s at most) for the tables to hold want at Revision rev.
func (f *panicFixture) waitFor(want map[tk]int, rev uint64) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !maps.Equal(f.contents(), want) || f.m.Revision() != rev {
		if time.Now().After(deadline) {
			f.t.Fatalf("tables %v at Revision %d, want %v at %d", f.contents(), f.m.Revision(), want, rev)
		}
		time.Sleep(time.Millisecond)
	}
}
