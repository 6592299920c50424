package reflector_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadystate/steadystate/reconciler/reconcilertest"
	"github.com/steadystate/steadystate/reflector"
	"github.com/steadystate/steadystate/statedb"
)

// firstListReflector runs a reflector of src into a new table with
// firstListTransform and a filter, and Idle: the table first holds seed, if
// not nil, an object the reflector does not own (so its first list takes
// the usual path, not the one of an empty table).
func firstListReflector(t *testing.T, src reflector.Source[int], idle <-chan struct{}, seed *obj) *fixture {
	f := &fixture{db: statedb.New(), health: &reconcilertest.Health{}}
	var err error
	if f.table, err = statedb.NewTable(f.db, "objs", nameIndex); err != nil {
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
// first list), values are filtered out or rejected, and Idle is closed
// after a random number of lists, or never.
func TestFirstListIntoEmptyTable(t *testing.T) {
	for seed := range uint64(40) {
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
			fast := firstListReflector(t, fastSrc, idle, nil)
			slow := firstListReflector(t, slowSrc, nil, &obj{Name: "seed"})
			closeAt := rng.IntN(5)
			for n := range 4 {
				synctest.Wait()
				want, _ := slow.contents()
				delete(want, "seed")
				got, _ := fast.contents()
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
