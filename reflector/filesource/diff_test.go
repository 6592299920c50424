package filesource

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/steadystate/steadystate/reflector"
)

// TestDiffModel takes random versions (items added, removed, changed,
// equal, repeated) and checks each one's events, error and revision, and
// the version List would return, against a plain map of the latest good
// version and the difference computed from it the obvious way.
//
// With background, first versions (of more than 8 items) are taken as a
// start's are: their items made in the background while the List goes on.
// With idle too, that work waits for a Config.Idle that never closes, so
// the next version makes it.
func TestDiffModel(t *testing.T) {
	for _, c := range []struct{ withEqual, background, idle bool }{{true, false, false}, {false, false, false}, {true, true, false}, {false, true, false}, {true, true, true}} {
		withEqual := c.withEqual
		t.Run(fmt.Sprintf("equal=%v/background=%v/idle=%v", withEqual, c.background, c.idle), func(t *testing.T) {
			if c.background {
				defer func(n int) { fillAbove = n }(fillAbove)
				fillAbove = 8
			}
			rng := rand.New(rand.NewPCG(3, 4))
			s := &Source[int]{cfg: Config[int]{Path: "f", Metrics: NopMetrics{}, Logger: slog.New(slog.DiscardHandler)}}
			if withEqual {
				s.cfg.Equal = func(a, b int) bool { return a == b }
			}
			if c.idle {
				s.cfg.Idle = make(chan struct{}) // never closed
			}
			model := map[itemKey]int{}
			var rev uint64
			for n := range 2000 {
				if c.background && n%20 == 0 {
					// A start again: a first version.
					s = &Source[int]{cfg: s.cfg}
					model, rev = map[itemKey]int{}, 0
				}
				var items []reflector.Item[int]
				for _, table := range []string{"a", "b"} {
					for k := range 20 {
						if rng.IntN(3) > 0 {
							items = append(items, reflector.Item[int]{Table: table, Key: fmt.Sprint(k), Value: rng.IntN(3)})
						}
					}
				}
				rng.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
				if len(items) > 0 && rng.IntN(10) == 0 {
					items = append(items, items[rng.IntN(len(items))]) // a key twice
				}
				// The model: duplicates reject the version; else deletes,
				// then puts, each in key order.
				var wantErr []error
				next := map[itemKey]int{}
				for _, it := range items {
					k := itemKey{it.Table, it.Key}
					if _, dup := next[k]; dup {
						wantErr = append(wantErr, fmt.Errorf("f: %s %q given twice", it.Table, it.Key))
					}
					next[k] = it.Value
				}
				var want []reflector.Event[int]
				if len(wantErr) == 0 {
					for _, k := range slices.SortedFunc(mapsKeys(model), compareKeys) {
						if _, ok := next[k]; !ok {
							want = append(want, reflector.Event[int]{Kind: reflector.Delete, Table: k.table, Key: k.key})
						}
					}
					for _, k := range slices.SortedFunc(mapsKeys(next), compareKeys) {
						if old, ok := model[k]; ok && withEqual && old == next[k] {
							continue
						}
						want = append(want, reflector.Event[int]{Kind: reflector.Put, Table: k.table, Key: k.key, Value: next[k]})
					}
					if len(want) > 0 || rev == 0 {
						rev++
					}
					for i := range want {
						want[i].Revision = rev
					}
					model = next
				}

				c, err := s.diff("f", items)
				if fmt.Sprint(err) != fmt.Sprint(errors.Join(wantErr...)) {
					t.Fatalf("error %v, want %v", err, errors.Join(wantErr...))
				}
				if err != nil {
					continue
				}
				// Without events (a List's read) the version is taken
				// the same, at the same revision.
				events := rng.IntN(4) > 0
				got, gotRev, _ := s.take(items, c, events)
				if !events && (got != nil || gotRev != rev) {
					t.Fatalf("without events: events %v at %d, want none at %d", got, gotRev, rev)
				}
				if events && (!slices.Equal(got, want) || gotRev != rev) {
					t.Fatalf("events %v at %d, want %v at %d", got, gotRev, want, rev)
				}
				var stored []reflector.Item[int]
				s.settle()
				for _, sl := range s.items {
					stored = append(stored, sl.item)
				}
				slices.SortFunc(stored, func(a, b reflector.Item[int]) int {
					return cmp.Or(cmp.Compare(a.Table, b.Table), cmp.Compare(a.Key, b.Key))
				})
				var wantStored []reflector.Item[int]
				for _, k := range slices.SortedFunc(mapsKeys(model), compareKeys) {
					wantStored = append(wantStored, reflector.Item[int]{Table: k.table, Key: k.key, Value: model[k]})
				}
				if !slices.Equal(stored, wantStored) {
					t.Fatalf("version kept %v, want %v", stored, wantStored)
				}
			}
		})
	}
}

func mapsKeys[V any](m map[itemKey]V) iter.Seq[itemKey] {
	return func(yield func(itemKey) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// A large first version's map waits for Config.Idle: nothing is made
// until it closes (the start keeps its cores), then it is.
func TestIdleDefersFirstMap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer func(n int) { fillAbove = n }(fillAbove)
		fillAbove = 8
		idle := make(chan struct{})
		s := &Source[int]{cfg: Config[int]{Path: "f", Metrics: NopMetrics{}, Logger: slog.New(slog.DiscardHandler), Idle: idle}}
		var items []reflector.Item[int]
		for k := range 20 {
			items = append(items, reflector.Item[int]{Table: "a", Key: fmt.Sprint(k), Value: k})
		}
		s.mu.Lock()
		c, err := s.diff("f", items)
		if err != nil {
			t.Fatal(err)
		}
		s.take(items, c, false)
		filled := s.filling
		s.mu.Unlock()
		if filled == nil {
			t.Fatal("the first version of 20 items was not left to the background")
		}
		synctest.Wait()
		if filled.Done() {
			t.Fatal("the first version's map was made before Idle closed")
		}
		close(idle)
		synctest.Wait()
		if !filled.Done() {
			t.Fatal("the first version's map was not made once Idle closed")
		}
		s.mu.Lock()
		s.settle()
		n := len(s.items)
		s.mu.Unlock()
		if n != 20 {
			t.Fatalf("the map holds %d items, want 20", n)
		}
	})
}
