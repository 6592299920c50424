package cilium

import (
	"testing"
	"time"
)

// Every workload at a small size on both sides, so that `go test` (and
// `make test`, under -race) checks that each benchmark does what it claims.

// bothSides runs fn as subtests steadystate and cilium with each side's
// constructor.
func bothSides[S any](t *testing.T, newSS, newCilium func(testing.TB) S, fn func(t *testing.T, s S)) {
	t.Run(implSteadystate, func(t *testing.T) { fn(t, newSS(t)) })
	t.Run(implCilium, func(t *testing.T) { fn(t, newCilium(t)) })
}

func TestWritesAndReads(t *testing.T) {
	keys := shuffled(randomInsertSize, 3)
	bothSides(t, newSSWriter, newCiliumWriter, func(t *testing.T, w writer) {
		w.insert(keys)
		w.insert(keys[:10]) // replaces
		if err := w.(iterator).iterate(len(keys)); err != nil {
			t.Fatal(err)
		}
		if err := w.(iterator).iterate(len(keys) + 1); err == nil {
			t.Fatal("iterate accepted a wrong count")
		}
	})
	newSS := func(tb testing.TB) lookuper { return newSSLookup(tb, keys) }
	newCilium := func(tb testing.TB) lookuper { return newCiliumLookup(tb, keys) }
	bothSides(t, newSS, newCilium, func(t *testing.T, l lookuper) {
		if got := l.lookup(); got != len(keys) {
			t.Fatalf("found %d of %d", got, len(keys))
		}
	})
}

func TestChanges(t *testing.T) {
	bothSides(t, newSSChanges, newCiliumChanges, func(t *testing.T, c changer) {
		for range 3 {
			if err := c.round(ids(changesSize)); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestPropagationDelay(t *testing.T) {
	bothSides(t, newSSRoundTrip, newCiliumRoundTrip, func(t *testing.T, rt roundTripper) {
		for range 20 {
			rt.roundTrip()
		}
		var batch map[int]int // objects of B per batch
		switch s := rt.(type) {
		case *ssRoundTrip:
			batch = countBatches(s.tables[1].All(s.db.ReadTxn()))
		case *ciRoundTrip:
			batch = countBatches(s.tables[1].All(s.db.ReadTxn()))
		}
		if batch[20] != probeSize || len(batch) != 1 {
			t.Fatalf("table b holds batches %v, want %d objects of batch 20", batch, probeSize)
		}
	})
}

func countBatches[Rev any](all func(func(*object, Rev) bool)) map[int]int {
	m := map[int]int{}
	for o := range all {
		m[o.Batch]++
	}
	return m
}

func TestDerive(t *testing.T) {
	for _, heavy := range []bool{false, true} {
		bothSides(t, newSSDerive, newCiliumDerive, func(t *testing.T, side deriveSide) {
			p := startPipeline(side, heavy)
			defer p.stop()
			for deadline := time.Now().Add(10 * time.Second); heavy && p.written.Load() == 0; {
				if time.Now().After(deadline) {
					t.Fatal("the load writer wrote nothing in 10s")
				}
				time.Sleep(time.Millisecond)
			}
			for range 20 {
				if d, err := p.probe(); err != nil || d <= 0 {
					t.Fatalf("probe: %v, %v", d, err)
				}
			}
			if written := p.stop(); heavy != (written > 0) {
				t.Fatalf("heavy=%v: load writer wrote %d objects", heavy, written)
			}
		})
	}
}

func TestAlternate(t *testing.T) {
	newSS := func(tb testing.TB) alternator { return prefilled(newSSDB(tb, "a", "b")) }
	newCilium := func(tb testing.TB) alternator { return prefilled(newCiDB(tb, "a", "b")) }
	bothSides(t, newSS, newCilium, func(t *testing.T, a alternator) {
		// Every key of both tables is written 3 times over; table A
		// still holds each key once.
		retainedPerTxn(a, 0, 3*2*alternateKeys/alternateBatch)
		if err := a.(iterator).iterate(alternateKeys); err != nil {
			t.Fatal(err)
		}
	})
	seen := map[uint64]int{}
	for k := range 2 * alternateKeys / alternateBatch {
		for _, id := range alternateWindow(k) {
			seen[id]++
		}
	}
	if len(seen) != alternateKeys {
		t.Fatalf("a cycle of ops writes %d keys, want %d", len(seen), alternateKeys)
	}
	for id, n := range seen {
		if n != 2 {
			t.Fatalf("a cycle of ops writes key %d %d times, want once per table", id, n)
		}
	}
}

// leaker is an alternator that keeps size bytes per transaction.
type leaker struct {
	size int
	kept [][]byte
}

func (l *leaker) fill(int, []uint64) { l.kept = append(l.kept, make([]byte, l.size)) }

// TestRetainedPerTxn: the measurement finds what an alternator keeps per
// transaction (as long as the alternator is alive, which it must ensure).
func TestRetainedPerTxn(t *testing.T) {
	for _, size := range []int{0, 256, 4096} {
		got := retainedPerTxn(&leaker{size: size, kept: make([][]byte, 0, 5000)}, 0, 5000)
		// Within 64 bytes either way: the heap figures move by a few
		// bytes per transaction with what the runtime allocates meanwhile.
		if got < float64(size)-64 || got > float64(size)+64 {
			t.Errorf("a leak of %d bytes per transaction measured as %.1f", size, got)
		}
	}
}

func TestSecondaryShapes(t *testing.T) {
	bothSides(t, newSSTagged, newCiliumTagged, func(t *testing.T, s tagSide) {
		s.insert(ids(100))
		s.insert(ids(secondarySize)) // replaces the first 100
		if err := checkTagged(s, secondarySize); err != nil {
			t.Fatal(err)
		}
	})
	keys := shuffled(randomInsertSize, 4)
	newSS := func(tb testing.TB) listInserter { s := newSSDB(tb, "objects"); s.fill(0, keys); return s }
	newCilium := func(tb testing.TB) listInserter { c := newCiDB(tb, "objects"); c.fill(0, keys); return c }
	bothSides(t, newSS, newCilium, func(t *testing.T, s listInserter) {
		if got := s.listInsert(keys); got != len(keys) {
			t.Fatalf("copied %d objects, want %d", got, len(keys))
		}
		if got := s.listInsert([]uint64{randomInsertSize}); got != 0 {
			t.Fatalf("copied %d objects of a missing key", got)
		}
		if err := s.(iterator).iterate(len(keys)); err != nil {
			t.Fatal(err)
		}
	})
}

func TestFloor(t *testing.T) {
	a, z := newFloorDB(), newFloorDB()
	for range 10 {
		if d := floorRoundTrip(a, z, time.Now()); d <= 0 {
			t.Fatalf("round trip took %v", d)
		}
	}
	w := startFloorReader(a)
	defer w.stop()
	for range 100 {
		if d := w.wake(); d <= 0 {
			t.Fatalf("wake took %v", d)
		}
	}
}
