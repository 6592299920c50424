package scaling

import (
	"testing"
	"time"
)

// The workloads at a small size, so that `go test` (and `make test`, under
// -race) checks that every benchmark still does what it claims.

func TestStores(t *testing.T) {
	const n = 2500 // not a multiple of batchSize
	objs, ids := newObjects(n), shuffledIDs(n)
	for _, impl := range impls {
		t.Run(impl.name, func(t *testing.T) {
			s := impl.new()
			writeAll(s, objs)
			if got := s.Lookup(ids); got != n {
				t.Fatalf("found %d of %d objects", got, n)
			}
			if got := s.Lookup([]uint64{n, n + 1}); got != 0 {
				t.Fatalf("found %d objects that were never written", got)
			}
		})
	}
}

func TestChangeFeed(t *testing.T) {
	const n = 1500
	for _, impl := range feedImpls {
		t.Run(impl.name, func(t *testing.T) {
			f := newFeed(t, n, impl.read)
			for range 3 {
				if _, got := f.round(); got != n {
					t.Fatalf("read %d changes, want %d", got, n)
				}
			}
			if got := f.read(); got != 0 {
				t.Fatalf("read %d changes without a write, want 0", got)
			}
		})
	}
}

func TestPropagation(t *testing.T) {
	for _, heavy := range []bool{false, true} {
		p := newPipeline(t, heavy)
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
	}
}
