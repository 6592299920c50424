package reflector_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/steadystate/steadystate/reflector"
	"github.com/steadystate/steadystate/statedb"
)

// TestMemoryPerTable: a first list sizes each table's bookkeeping for the
// objects of that table: a Multi of two tables whose list has 20,000
// objects of one and one of the other costs as much as a Multi of the
// first table alone with its 20,000 (the second table's maps do not take
// room for half the list, nor the first's grow to take the rest).
func TestMemoryPerTable(t *testing.T) {
	const n = 20_000
	start := func(t *testing.T, tables []string, extra int) func() {
		db := statedb.New()
		var specs []reflector.TableSpec[int]
		for _, name := range tables {
			tbl, err := statedb.NewTable(db, name, nameIndex)
			if err != nil {
				t.Fatal(err)
			}
			specs = append(specs, reflector.Into[int, *obj]{
				Table:     name,
				Writer:    objWriter(tbl),
				Transform: func(key string, v int) (*obj, error) { return &obj{Name: key, Value: v}, nil },
			})
		}
		var items []reflector.Item[int]
		for i := range n {
			items = append(items, reflector.Item[int]{Table: "ta", Key: fmt.Sprintf("k%06d", i), Value: i, Revision: 1})
		}
		for i := range extra {
			items = append(items, reflector.Item[int]{Table: "tb", Key: fmt.Sprintf("k%06d", i), Value: i, Revision: 1})
		}
		src := &listSource{}
		src.set(1, items...)
		m, err := reflector.NewMulti(db, reflector.MultiConfig[int]{
			Name: "mem", Source: src, Tables: specs,
			Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); m.Run(ctx) }()
		deadline := time.After(time.Minute)
		for {
			rev, moved := m.RevisionWatch()
			if rev == 1 {
				break
			}
			select {
			case <-moved:
			case <-deadline:
				t.Fatal("the list was not committed within a minute")
			}
		}
		return func() {
			cancel()
			<-done
			runtime.KeepAlive(db)
		}
	}
	l0 := liveHeap()
	stopA := start(t, []string{"ta"}, 0)
	defer stopA()
	l1 := liveHeap()
	stopB := start(t, []string{"ta", "tb"}, 1)
	defer stopB()
	l2 := liveHeap()
	alone, withOne := int64(l1-l0), int64(l2-l1)
	t.Logf("%d objects of one table: %d KB; and one object of a second table: %d KB", n, alone>>10, withOne>>10)
	if withOne-alone > 200<<10 {
		t.Fatalf("a second table with one object cost %d KB", (withOne-alone)>>10)
	}
}

// liveHeap returns the bytes of live heap after a full collection.
func liveHeap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
