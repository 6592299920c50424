package reflector_test

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadystate/steadystate/reflector"
	"github.com/steadystate/steadystate/statedb"
)

// stepSource lists what set gave it; each Watch hands the test its channel
// (on watches), which the test sends on and closes to lose the watch.
type stepSource struct {
	mu      sync.Mutex
	items   []reflector.Item[int]
	rev     uint64
	watches chan chan reflector.Event[int]
	afters  []uint64 // each Watch's after
}

func newStepSource(rev uint64, items ...reflector.Item[int]) *stepSource {
	s := &stepSource{watches: make(chan chan reflector.Event[int])}
	s.set(rev, items...)
	return s
}

func (s *stepSource) set(rev uint64, items ...reflector.Item[int]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.items, s.rev = slices.Clone(items), rev
}

func (s *stepSource) List(context.Context) ([]reflector.Item[int], uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.items), s.rev, nil
}

func (s *stepSource) Watch(ctx context.Context, after uint64) (<-chan reflector.Event[int], error) {
	s.mu.Lock()
	s.afters = append(s.afters, after)
	s.mu.Unlock()
	ch := make(chan reflector.Event[int])
	select {
	case s.watches <- ch:
	case <-ctx.Done():
	}
	return ch, nil
}

// startStep runs a Reflector of src into a new table with transform, the
// batch size and interval given, until the test ends.
func startStep(t *testing.T, src reflector.Source[int], batch int, interval time.Duration, transform func(string, int) (*obj, error)) *fixture {
	t.Helper()
	f := &fixture{db: statedb.New()}
	var err error
	if f.table, err = statedb.NewTable(f.db, "objs", nameIndex); err != nil {
		t.Fatal(err)
	}
	if transform == nil {
		transform = func(key string, v int) (*obj, error) { return &obj{Name: key, Value: v}, nil }
	}
	f.reflector, err = reflector.New(f.db, reflector.Config[int, *obj]{
		Name: "test", Source: src, Writer: objWriter(f.table), Transform: transform,
		BatchSize: batch, BatchInterval: interval,
		RetryBackoffMin: time.Millisecond, RetryBackoffMax: time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
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

func putEv(key string, v int, rev uint64) reflector.Event[int] {
	return reflector.Event[int]{Kind: reflector.Put, Key: key, Value: v, Revision: rev}
}

func progressEv(rev uint64) reflector.Event[int] {
	return reflector.Event[int]{Kind: reflector.Progress, Revision: rev}
}

// A source that breaks its promise: a Progress at R sent before the
// events of R (as etcd before 3.4.25/3.5.8 may do with requested progress
// notifications, issue 15220). The reflector cannot tell; it believes the
// Progress, claims R, and drops R's later events as stale (the documented
// rule: events at or below a revision a Progress said was complete are
// ignored). Nothing heals that but a list: once the watch is lost, the
// relist writes what was dropped, with no lost delete.
func TestProgressBeforeItsEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newStepSource(10, reflector.Item[int]{Key: "x", Value: 1})
		f := startStep(t, src, 1000, time.Second, nil)
		w := <-src.watches
		w <- progressEv(11)
		w <- putEv("a", 2, 11) // after its Progress: a broken promise
		w <- putEv("b", 3, 12)
		w <- progressEv(12)
		synctest.Wait()
		// What happens today (documented): a is dropped, 12 is claimed.
		if got, _ := f.contents(); !maps.Equal(got, map[string]int{"x": 1, "b": 3}) || f.reflector.Revision() != 12 {
			t.Fatalf("after a Progress before its events: table %v at Revision %d, want a dropped and Revision 12 (update the package doc if this changed)",
				got, f.reflector.Revision())
		}
		// A relist heals it.
		src.set(12, reflector.Item[int]{Key: "x", Value: 1}, reflector.Item[int]{Key: "a", Value: 2}, reflector.Item[int]{Key: "b", Value: 3})
		close(w)
		w = <-src.watches
		synctest.Wait()
		if got, _ := f.contents(); !maps.Equal(got, map[string]int{"x": 1, "a": 2, "b": 3}) || f.reflector.Revision() != 12 {
			t.Fatalf("after the relist: table %v at Revision %d", got, f.reflector.Revision())
		}
		close(w)
		<-src.watches
	})
}

// Events duplicated within a watch, and replayed by the next watch from
// before the revision it was asked for (a source that reconnects from an
// older revision), never override newer state nor move Revision past what
// is committed: with BatchSize 1, every event of a revision is held until
// the revision is whole.
func TestDuplicatesAndReplays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newStepSource(10, reflector.Item[int]{Key: "x", Value: 1})
		f := startStep(t, src, 1, time.Second, nil)
		w := <-src.watches
		for _, ev := range []reflector.Event[int]{
			putEv("a", 1, 11), putEv("a", 1, 11), putEv("b", 1, 11), putEv("b", 1, 11), // duplicates
			putEv("a", 2, 12), putEv("c", 2, 12), putEv("c", 2, 12),
		} {
			w <- ev
		}
		synctest.Wait()
		// 11 is whole (12 began), 12 is not.
		if got, _ := f.contents(); !maps.Equal(got, map[string]int{"x": 1, "a": 1, "b": 1}) || f.reflector.Revision() != 11 {
			t.Fatalf("table %v at Revision %d, want 11's", got, f.reflector.Revision())
		}
		w <- progressEv(12)
		synctest.Wait()
		want := map[string]int{"x": 1, "a": 2, "b": 1, "c": 2}
		if got, _ := f.contents(); !maps.Equal(got, want) || f.reflector.Revision() != 12 {
			t.Fatalf("table %v at Revision %d, want %v at 12", got, f.reflector.Revision(), want)
		}
		// The watch is lost; the relist is at 12, and the next watch
		// replays 11 and 12 (older values) before 13: the replay changes
		// nothing, 13 applies.
		src.set(12, reflector.Item[int]{Key: "x", Value: 1}, reflector.Item[int]{Key: "a", Value: 2},
			reflector.Item[int]{Key: "b", Value: 1}, reflector.Item[int]{Key: "c", Value: 2})
		close(w)
		w = <-src.watches
		synctest.Wait()
		src.mu.Lock()
		after := src.afters[len(src.afters)-1]
		src.mu.Unlock()
		if after != 12 {
			t.Fatalf("the watch after the relist started after %d, want 12", after)
		}
		for _, ev := range []reflector.Event[int]{
			putEv("a", 1, 11), putEv("b", 1, 11), putEv("a", 2, 12), putEv("c", 2, 12), progressEv(11), progressEv(12), // replayed
			putEv("c", 3, 13), putEv("c", 3, 13), progressEv(13),
		} {
			w <- ev
			synctest.Wait()
			if got, _ := f.contents(); ev.Revision <= 12 && (!maps.Equal(got, want) || f.reflector.Revision() != 12) {
				t.Fatalf("after the replayed %v at %d: table %v at Revision %d, want %v at 12", ev.Kind, ev.Revision, got, f.reflector.Revision(), want)
			}
		}
		want["c"] = 3
		if got, _ := f.contents(); !maps.Equal(got, want) || f.reflector.Revision() != 13 {
			t.Fatalf("after 13: table %v at Revision %d, want %v at 13", got, f.reflector.Revision(), want)
		}
		close(w)
		<-src.watches
	})
}
