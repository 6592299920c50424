package reflector_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/steadystate/steadystate/internal/memtest"
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
		src := &listSource{watching: make(chan struct{}, 1)}
		src.set(1, items...)
		m, err := reflector.NewMulti(db, reflector.MultiConfig[int]{
			Name: "mem", Source: src, Tables: specs,
			Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		stop := running(t, m, 1)
		// The first list's keys go into the maps after its commit, in
		// the background; a relist waits for them: measured then.
		<-src.watching
		src.set(2, items...)
		src.lose()
		waitRevision(t, m, 2)
		return func() {
			stop()
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

// liveHeap is memtest.LiveHeap.
var liveHeap = memtest.LiveHeap

// TestMemoryAfterShrink: after a list of 20,000 objects the source shrinks
// to 10 (relisted): the reflector's memory is that of 10 objects again,
// not of the largest list it ever took.
func TestMemoryAfterShrink(t *testing.T) {
	const n = 20_000
	items := func(k int) []reflector.Item[int] {
		var out []reflector.Item[int]
		for i := range k {
			out = append(out, reflector.Item[int]{Key: fmt.Sprintf("k%06d", i), Value: i, Revision: 1})
		}
		return out
	}
	run := func(t *testing.T, src *listSource, upTo uint64) (*reflector.Reflector[int, *obj], func()) {
		db := statedb.New()
		tbl, err := statedb.NewTable(db, "objs", nameIndex)
		if err != nil {
			t.Fatal(err)
		}
		r, err := reflector.New(db, reflector.Config[int, *obj]{
			Name: "shrink", Source: src, Writer: objWriter(tbl),
			Transform: func(key string, v int) (*obj, error) { return &obj{Name: key, Value: v}, nil },
			Logger:    slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		stop := running(t, r, upTo)
		return r, func() {
			stop()
			runtime.KeepAlive(db)
		}
	}
	l0 := liveHeap()
	small := &listSource{}
	small.set(2, items(10)...)
	_, stopSmall := run(t, small, 2)
	defer stopSmall()
	l1 := liveHeap()

	big := &listSource{watching: make(chan struct{}, 1)}
	big.set(1, items(n)...)
	r, stopBig := run(t, big, 1)
	defer stopBig()
	<-big.watching
	big.set(2, items(10)...)
	big.lose() // the watch ends: the reflector relists
	waitRevision(t, r, 2)
	l2 := liveHeap()
	tenOnly, afterShrink := int64(l1-l0), int64(l2-l1)
	t.Logf("10 objects: %d KB; 10 objects after %d: %d KB", tenOnly>>10, n, afterShrink>>10)
	if afterShrink-tenOnly > 200<<10 {
		t.Fatalf("the reflector kept %d KB after its source shrank from %d objects to 10", (afterShrink-tenOnly)>>10, n)
	}
}

// revisioned is a Reflector or a Multi.
type revisioned interface {
	Run(context.Context) error
	RevisionWatch() (uint64, <-chan struct{})
}

// running runs r until stop is called, once its Revision is rev.
func running(t *testing.T, r revisioned, rev uint64) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	waitRevision(t, r, rev)
	return func() {
		cancel()
		<-done
	}
}

// waitRevision waits until r's Revision is rev.
func waitRevision(t *testing.T, r interface {
	RevisionWatch() (uint64, <-chan struct{})
}, rev uint64) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		got, moved := r.RevisionWatch()
		if got == rev {
			return
		}
		select {
		case <-moved:
		case <-deadline:
			t.Fatalf("revision %d not reached within a minute (at %d)", rev, got)
		}
	}
}
