package reflector_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadystate/steadystate/reconciler/reconcilertest"
	"github.com/steadystate/steadystate/reflector"
	"github.com/steadystate/steadystate/statedb"
)

// byValue is a Transform that derives the primary key from the value:
// value ID*100+P is the object "oID" with value P, so that two source keys
// can hold one object with different values.
func byValue(_ string, v int) (*obj, error) {
	return &obj{Name: fmt.Sprintf("o%d", v/100), Value: v % 100}, nil
}

// No object is lost when its source key changes: as long as any key holds
// an object, it stays; the most recently written key's value wins, and
// when that key goes, the value of a key that still holds it is written.
func TestKeyChange(t *testing.T) {
	put := func(key string, v int, rev uint64) reflector.Event[int] {
		return reflector.Event[int]{Kind: reflector.Put, Key: key, Value: v, Revision: rev}
	}
	del := func(key string, rev uint64) reflector.Event[int] {
		return reflector.Event[int]{Kind: reflector.Delete, Key: key, Revision: rev}
	}
	steps := []struct {
		what string
		ev   reflector.Event[int]
		want map[string]int
	}{
		{"k2 holds k1's object: its value wins", put("k2", 502, 11), map[string]int{"o5": 2}},
		{"k1 deleted: k2 still holds it", del("k1", 12), map[string]int{"o5": 2}},
		{"k3 holds it too: its value wins", put("k3", 503, 13), map[string]int{"o5": 3}},
		{"k3 deleted: k2's value again", del("k3", 14), map[string]int{"o5": 2}},
		{"k4 holds it, then k2 moves to another object: k4's stays", put("k4", 504, 15), map[string]int{"o5": 4}},
		{"k2 now holds o6", put("k2", 601, 16), map[string]int{"o5": 4, "o6": 1}},
		{"k4 moves to o6 as well: o5 has no key left", put("k4", 607, 17), map[string]int{"o6": 7}},
		{"k4 deleted: k2's o6", del("k4", 18), map[string]int{"o6": 1}},
		{"k2 deleted: gone", del("k2", 19), map[string]int{}},
	}
	synctest.Test(t, func(t *testing.T) {
		src := &chanSource{items: []reflector.Item[int]{{Key: "k1", Value: 501}}, rev: 10, events: make(chan reflector.Event[int])}
		f := startWith(t, src, byValue)
		synctest.Wait()
		if got, _ := f.contents(); !maps.Equal(got, map[string]int{"o5": 1}) {
			t.Fatalf("after the list: %v", got)
		}
		for _, st := range steps {
			src.events <- st.ev
			src.events <- reflector.Event[int]{Kind: reflector.Progress, Revision: st.ev.Revision}
			synctest.Wait()
			if got, _ := f.contents(); !maps.Equal(got, st.want) || f.reflector.Revision() != st.ev.Revision {
				t.Fatalf("%s: table %v at revision %d, want %v at %d", st.what, got, f.reflector.Revision(), st.want, st.ev.Revision)
			}
		}
	})
}

// In a list, of two keys that hold one object the one changed last wins;
// a relist that drops it writes the other's value.
func TestKeyChangeInList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &listSource{}
		src.set(10, reflector.Item[int]{Key: "a", Value: 501, Revision: 9}, reflector.Item[int]{Key: "b", Value: 502, Revision: 4})
		f := startWith(t, src, byValue)
		synctest.Wait()
		if got, _ := f.contents(); !maps.Equal(got, map[string]int{"o5": 1}) {
			t.Fatalf("after the list: %v, want a's value (changed last)", got)
		}
		src.set(11, reflector.Item[int]{Key: "b", Value: 502, Revision: 4})
		src.lose()
		synctest.Wait()
		if got, _ := f.contents(); !maps.Equal(got, map[string]int{"o5": 2}) {
			t.Fatalf("after a relist without a: %v, want b's value", got)
		}
	})
}

// listSource lists what set gave it; its watch ends when lose is called.
type listSource struct {
	items atomic.Pointer[[]reflector.Item[int]]
	rev   atomic.Uint64
	lost  atomic.Pointer[chan struct{}]
	// watching, if set, gets a value once a Watch can be lost.
	watching chan struct{}
}

func (s *listSource) set(rev uint64, items ...reflector.Item[int]) {
	s.items.Store(&items)
	s.rev.Store(rev)
}

func (s *listSource) lose() {
	if c := s.lost.Load(); c != nil {
		close(*c)
	}
}

func (s *listSource) List(context.Context) ([]reflector.Item[int], uint64, error) {
	return append([]reflector.Item[int](nil), *s.items.Load()...), s.rev.Load(), nil
}

func (s *listSource) Watch(ctx context.Context, _ uint64) (<-chan reflector.Event[int], error) {
	lost := make(chan struct{})
	s.lost.Store(&lost)
	if s.watching != nil {
		select {
		case s.watching <- struct{}{}:
		default: // one waiting is enough
		}
	}
	ch := make(chan reflector.Event[int])
	go func() {
		defer close(ch)
		select {
		case <-ctx.Done():
		case <-lost:
		}
	}()
	return ch, nil
}

// startWith runs a reflector of src into a new table with transform.
func startWith(t *testing.T, src reflector.Source[int], transform func(string, int) (*obj, error)) *fixture {
	f := &fixture{db: statedb.New(), health: &reconcilertest.Health{}}
	var err error
	if f.table, err = statedb.NewTable(f.db, "objs", nameIndex); err != nil {
		t.Fatal(err)
	}
	f.reflector, err = reflector.New(f.db, reflector.Config[int, *obj]{
		Name: "test", Source: src, Writer: objWriter(f.table), Transform: transform,
		BatchInterval: time.Second, Health: f.health,
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

// A panic in user code during a commit (here the writer's Equal) aborts
// the commit and leaves the reflector's memory as it was: the delete in
// the same batch is not forgotten, and the next Run applies it. Without
// the rollback the reflector would remember a as deleted while the table
// still holds it, and no later list would delete it.
func TestPanicInCommitRollsBack(t *testing.T) {
	src := newFakeSource()
	src.put("a", 1)
	src.put("b", 2)
	db := statedb.New()
	table, err := statedb.NewTable(db, "objs", nameIndex)
	if err != nil {
		t.Fatal(err)
	}
	var armed atomic.Bool
	w := objWriter(table)
	equal := w.Equal
	w.Equal = func(a, b *obj) bool {
		if armed.Load() && b.Name == "b" {
			panic("Equal of b")
		}
		return equal(a, b)
	}
	r, err := reflector.New(db, reflector.Config[int, *obj]{
		Name: "test", Source: src, Writer: w,
		Transform: func(key string, v int) (*obj, error) { return &obj{Name: key, Value: v}, nil },
		// Revisions end by the source's Progress only, never by time: the
		// delete and the put below are one batch however slow the machine.
		BatchInterval: time.Hour, RetryBackoffMin: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{db: db, table: table, reflector: r}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		r.Run(ctx)
	}()
	f.waitFor(t, map[string]int{"a": 1, "b": 2})
	// Revision moves just after the commit that the table shows.
	f.waitRevision(t, src.revision())
	listed := r.Revision()
	armed.Store(true)
	src.del("a")
	src.put("b", 5) // its commit panics, with a's delete in the same batch
	src.bump()      // the watch, caught up, sends a Progress: the batch is committed
	if p := <-panicked; p == nil || !strings.Contains(fmt.Sprint(p), "Equal of b") {
		t.Fatalf("Run ended with %v, want the panic of Equal", p)
	}
	if got, _ := f.contents(); !maps.Equal(got, map[string]int{"a": 1, "b": 2}) || r.Revision() != listed {
		t.Fatalf("after the panic: table %v at revision %d, want the list's at %d (the commit aborted)", got, r.Revision(), listed)
	}
	armed.Store(false)
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	f.waitFor(t, map[string]int{"b": 5})
	f.waitRevision(t, src.revision())
}

// A panic in Transform or Filter rejects that value: the table keeps the
// last good version, health says why, and the reflector goes on.
func TestCallbackPanicRejects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &chanSource{items: []reflector.Item[int]{{Key: "a", Value: 1}}, rev: 10, events: make(chan reflector.Event[int])}
		f := startWith(t, src, func(key string, v int) (*obj, error) {
			if v == 13 {
				panic("unlucky")
			}
			return &obj{Name: key, Value: v}, nil
		})
		synctest.Wait()
		src.events <- reflector.Event[int]{Kind: reflector.Put, Key: "a", Value: 13, Revision: 11}
		src.events <- reflector.Event[int]{Kind: reflector.Put, Key: "b", Value: 2, Revision: 11}
		src.events <- reflector.Event[int]{Kind: reflector.Progress, Revision: 11}
		synctest.Wait()
		if got, _ := f.contents(); !maps.Equal(got, map[string]int{"a": 1, "b": 2}) || f.reflector.Revision() != 11 {
			t.Fatalf("table %v at %d, want a's last good value and b at 11", got, f.reflector.Revision())
		}
		if rej := f.reflector.Rejected(); len(rej) != 1 || !strings.Contains(rej[0], "a: Transform panicked: unlucky") {
			t.Fatalf("Rejected() = %q", rej)
		}
		f.health.WaitFor(t, reconcilertest.LevelDegraded, "Transform panicked")
		src.events <- reflector.Event[int]{Kind: reflector.Put, Key: "a", Value: 3, Revision: 12}
		src.events <- reflector.Event[int]{Kind: reflector.Progress, Revision: 12}
		synctest.Wait()
		if got, _ := f.contents(); !maps.Equal(got, map[string]int{"a": 3, "b": 2}) || len(f.reflector.Rejected()) != 0 {
			t.Fatalf("after a good value: table %v, rejected %q", got, f.reflector.Rejected())
		}
		f.health.WaitFor(t, reconcilertest.LevelOK, "")
	})
}
