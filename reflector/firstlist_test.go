package reflector_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
	"github.com/steadystate/steadystate/reflector"
	"github.com/steadystate/steadystate/statedb"
)

// firstListReflector runs a reflector of src into a new table with
// firstListTransform and a filter, and Idle: the table first holds seed, if
// not nil, an object the reflector does not own (so its first list takes
// the usual path, not the one of an empty table); with uniqueValues, a
// unique index on the objects' values makes some writes fail.
func firstListReflector(t *testing.T, src reflector.Source[int], idle <-chan struct{}, seed *obj, uniqueValues bool) *fixture {
	f := &fixture{db: statedb.New(), health: &reconcilertest.Health{}}
	var secondary []statedb.Indexer[*obj]
	if uniqueValues {
		// Two objects with one value: the second's Insert fails, and
		// the value is rejected.
		secondary = append(secondary, statedb.Index[*obj, int]{
			Name: "value", FromObject: func(o *obj) index.KeySet { return index.NewKeySet(index.Int(o.Value)) },
			FromKey: index.Int, Unique: true,
		})
	}
	var err error
	if f.table, err = statedb.NewTable(f.db, "objs", nameIndex, secondary...); err != nil {
		t.Fatal(err)
	}
	if seed != nil {
		wtxn := f.db.WriteTxn(f.table)
		f.table.Insert(wtxn, seed)
		wtxn.Commit()
	}
	f.reflector, err = reflector.New(f.db, reflector.Config[int, *obj]{
		Name: "test", Source: src, Writer: objWriter(f.table),
		Transform: firstListTransform,
		Filter:    func(_ string, v int) bool { return v%100 != 7 },
		Health:    f.health, Idle: idle,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.reflector.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

// firstListTransform is byValue, rejecting negative values.
func firstListTransform(key string, v int) (*obj, error) {
	if v < 0 {
		return nil, errors.New("negative")
	}
	return byValue(key, v)
}

// A first list into an empty table is written without the reflector's
// maps, whose keys are entered later (once Idle is closed, or when the
// next list needs them). The model is the same lists into a table that
// holds an object of its own, whose first list takes the usual path:
// after every list both hold the same objects (but that one), the same
// rejections and the same count. Keys share objects (a collision in the
// first list), values are filtered out or rejected (by Transform, or by
// a write that a unique index refuses), and Idle is closed after a random
// number of lists, or never.
func TestFirstListIntoEmptyTable(t *testing.T) {
	for seed := range uint64(60) {
		uniqueValues := seed%2 == 1
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			idle := make(chan struct{})
			fastSrc, slowSrc := &listSource{}, &listSource{}
			list := func(rev uint64) {
				var items []reflector.Item[int]
				for k := range 24 {
					if rng.IntN(4) == 0 {
						continue
					}
					v := rng.IntN(16)*100 + rng.IntN(12)
					if rng.IntN(10) == 0 {
						v = -1
					}
					items = append(items, reflector.Item[int]{Key: fmt.Sprint("k", k), Value: v, Revision: rev - uint64(rng.IntN(3))})
				}
				fastSrc.set(rev, items...)
				slowSrc.set(rev, items...)
			}
			list(10)
			fast := firstListReflector(t, fastSrc, idle, nil, uniqueValues)
			slow := firstListReflector(t, slowSrc, nil, &obj{Name: "seed", Value: 99}, uniqueValues)
			closeAt := rng.IntN(5)
			for n := range 4 {
				synctest.Wait()
				want, _ := slow.contents()
				delete(want, "seed")
				got, _ := fast.contents()
				delete(got, "seed")
				if !maps.Equal(got, want) {
					t.Fatalf("seed %d, list %d: table %v, want %v (the usual path's)", seed, n, got, want)
				}
				if got, want := fast.reflector.Rejected(), slow.reflector.Rejected(); !slices.Equal(got, want) {
					t.Fatalf("seed %d, list %d: rejected %v, want %v", seed, n, got, want)
				}
				// The count of objects, and the rejections, as health says.
				if got, _ := fast.health.Last(); got.String() != lastReport(slow).String() {
					t.Fatalf("seed %d, list %d: health %v, want %v", seed, n, got, lastReport(slow))
				}
				if uniqueValues {
					// Later lists delete, and which of two values a unique
					// index refuses then depends on the order of the deletes
					// (the reflector's maps'), on either path: the first list
					// is compared, not the rest.
					break
				}
				if n == closeAt {
					close(idle)
				}
				list(uint64(11 + n))
				time.Sleep(2 * time.Second) // a watch that lasted: relisted at once
				fastSrc.lose()
				slowSrc.lose()
			}
		})
	}
}

func lastReport(f *fixture) reconcilertest.HealthReport {
	r, _ := f.health.Last()
	return r
}

// A panic in an index during a first list (written without the maps, see
// TestFirstListIntoEmptyTable) rolls it back: the tables stay empty and a
// Run without the panic converges, its later deletes applied. One table is
// empty (the first list's short way) and the other holds an object of
// its own (the usual way), in one commit; Idle never closes, so the maps
// are made when the next change needs them, and Run's end waits for them.
func TestPanicInFirstList(t *testing.T) {
	idle := make(chan struct{}) // never closed
	f := newPanicFixture(t, idle, func(db *statedb.DB, tables map[string]statedb.RWTable[*obj]) {
		wtxn := db.WriteTxn(tables["tb"])
		tables["tb"].Insert(wtxn, &obj{Name: "own", Value: 7})
		wtxn.Commit()
	})
	f.armed.Store(true)
	src, m, contents, waitFor := f.src, f.m, f.contents, f.waitFor
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := func() <-chan any { return f.run(ctx) }
	own := map[tk]int{{"tb", "own"}: 7}

	src.commit([]mop{{tk: tk{"ta", "a"}, val: 1}, {tk: tk{"ta", "b"}, val: 666}, {tk: tk{"tb", "c"}, val: 3}})
	if p := <-run(); p == nil || !strings.Contains(fmt.Sprint(p), "FromObject of b=666") {
		t.Fatalf("Run ended with %v, want the panic of FromObject", p)
	}
	if got := contents(); !maps.Equal(got, own) || m.Revision() != 0 {
		t.Fatalf("after the first list's panic: tables %v at Revision %d, want only tb's own object at 0", got, m.Revision())
	}

	f.armed.Store(false)
	second := run()
	waitFor(map[tk]int{{"ta", "a"}: 1, {"ta", "b"}: 666, {"tb", "c"}: 3, {"tb", "own"}: 7}, src.revision())
	src.commit([]mop{{tk: tk{"ta", "a"}, del: true}, {tk: tk{"tb", "c"}, del: true}, {tk: tk{"ta", "d"}, val: 4}})
	waitFor(map[tk]int{{"ta", "b"}: 666, {"ta", "d"}: 4, {"tb", "own"}: 7}, src.revision())
	cancel()
	if p := <-second; p != nil {
		t.Fatalf("the second Run panicked: %v", p)
	}

	// A Run after the end lists again: what it no longer lists goes.
	src.commit([]mop{{tk: tk{"ta", "b"}, del: true}})
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	third := run()
	waitFor(map[tk]int{{"ta", "d"}: 4, {"tb", "own"}: 7}, src.revision())
	cancel()
	if p := <-third; p != nil {
		t.Fatalf("the third Run panicked: %v", p)
	}
}
