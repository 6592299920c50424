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
	src := newMultiSource(1)
	var armed atomic.Bool
	// An index on value: its FromObject panics for 666 while armed, on
	// insert and on delete alike.
	byValue := statedb.Index[*obj, int]{
		Name: "value",
		FromObject: func(o *obj) index.KeySet {
			if armed.Load() && o.Value == 666 {
				panic(fmt.Sprintf("FromObject of %s=666", o.Name))
			}
			return index.NewKeySet(index.Int(o.Value))
		},
		FromKey: index.Int,
	}
	db := statedb.New()
	var specs []reflector.TableSpec[int]
	tables := map[string]statedb.RWTable[*obj]{}
	for _, name := range []string{"ta", "tb"} {
		tbl, err := statedb.NewTable(db, name, nameIndex, byValue)
		if err != nil {
			t.Fatal(err)
		}
		tables[name] = tbl
		specs = append(specs, reflector.Into[int, *obj]{Table: name, Writer: objWriter(tbl),
			Transform: func(key string, v int) (*obj, error) { return &obj{Name: key, Value: v}, nil }})
	}
	m, err := reflector.NewMulti(db, reflector.MultiConfig[int]{
		Name: "multi", Source: src, Tables: specs,
		BatchSize: 1000, BatchInterval: time.Millisecond,
		RetryBackoffMin: time.Millisecond, RetryBackoffMax: time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	change := func(ops ...mop) { src.commit(ops) }
	contents := func() map[tk]int {
		txn := db.ReadTxn()
		got := map[tk]int{}
		for name, tbl := range tables {
			for o := range tbl.All(txn) {
				got[tk{name, o.Name}] = o.Value
			}
		}
		return got
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := func() <-chan any {
		ended := make(chan any, 1)
		go func() {
			defer func() { ended <- recover() }()
			m.Run(ctx)
		}()
		return ended
	}
	waitFor := func(want map[tk]int, rev uint64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !maps.Equal(contents(), want) || m.Revision() != rev {
			if time.Now().After(deadline) {
				t.Fatalf("tables %v at Revision %d, want %v at %d", contents(), m.Revision(), want, rev)
			}
			time.Sleep(time.Millisecond)
		}
	}

	change(mop{tk: tk{"ta", "a"}, val: 666}, mop{tk: tk{"ta", "keep"}, val: 1}, mop{tk: tk{"tb", "b"}, val: 1})
	first := run()
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
	if p := <-run(); p == nil || !strings.Contains(fmt.Sprint(p), "FromObject of a=666") {
		t.Fatalf("the second Run ended with %v, want the panic of FromObject in the relist", p)
	}
	if got := contents(); !maps.Equal(got, before) || m.Revision() != listed {
		t.Fatalf("after the relist's panic: tables %v at Revision %d, want the list's %v at %d", got, m.Revision(), before, listed)
	}

	// Disarmed: converges, with a's delete.
	armed.Store(false)
	third := run()
	waitFor(map[tk]int{{"ta", "keep"}: 1, {"ta", "c"}: 4, {"tb", "b"}: 2, {"tb", "new"}: 3}, src.revision())
	change(mop{tk: tk{"tb", "b"}, del: true})
	waitFor(map[tk]int{{"ta", "keep"}: 1, {"ta", "c"}: 4, {"tb", "new"}: 3}, src.revision())
	cancel()
	if p := <-third; p != nil {
		t.Fatalf("the third Run panicked: %v", p)
	}
}
