package reflector_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
	"github.com/steadystate/steadystate/reflector"
	"github.com/steadystate/steadystate/statedb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// obj is the desired object: a name, a value and a status.
type obj struct {
	Name   string
	Value  int
	Status reconciler.Status
}

var nameIndex = statedb.Index[*obj, string]{
	Name:       "name",
	FromObject: func(o *obj) index.KeySet { return index.NewKeySet(index.String(o.Name)) },
	FromKey:    index.String,
	Unique:     true,
}

// fakeSource is a source of int values by key with a revision per change.
// It can lose its watches, replay and duplicate events, and compact its
// history (a watch from before the compaction gets Resync). Its revision
// also moves without a change of its own (bump: a change elsewhere, as in
// etcd, whose revision is the whole cluster's); a watch that has sent
// every change sends Progress at the current revision, as etcd does for a
// watcher that caught up.
type fakeSource struct {
	mu        sync.Mutex
	state     map[string]int
	rev       uint64
	history   []reflector.Event[int]
	compacted uint64 // events at or below are gone
	watches   []*fakeWatch
	lists     int
	failList  int // lists still to fail
}

type fakeWatch struct {
	ch   chan reflector.Event[int]
	next uint64 // the next revision to send
	done chan struct{}
	once sync.Once
}

func (w *fakeWatch) close() { w.once.Do(func() { close(w.done) }) }

func newFakeSource() *fakeSource { return &fakeSource{state: map[string]int{}} }

func (s *fakeSource) List(ctx context.Context) ([]reflector.Item[int], uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists++
	if s.failList > 0 {
		s.failList--
		return nil, 0, errors.New("source unavailable")
	}
	var items []reflector.Item[int]
	for k, v := range s.state {
		items = append(items, reflector.Item[int]{Key: k, Value: v})
	}
	return items, s.rev, nil
}

func (s *fakeSource) Watch(ctx context.Context, after uint64) (<-chan reflector.Event[int], error) {
	w := &fakeWatch{ch: make(chan reflector.Event[int]), next: after + 1, done: make(chan struct{})}
	s.mu.Lock()
	s.watches = append(s.watches, w)
	s.mu.Unlock()
	go s.serve(ctx, w)
	return w.ch, nil
}

// serve sends w's events in order, with a duplicate now and then, until
// the watch is lost or ctx ends.
func (s *fakeSource) serve(ctx context.Context, w *fakeWatch) {
	defer close(w.ch)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for {
		s.mu.Lock()
		var ev reflector.Event[int]
		have := false
		i, _ := slices.BinarySearchFunc(s.history, w.next, func(e reflector.Event[int], rev uint64) int {
			return cmp.Compare(e.Revision, rev)
		})
		switch {
		case w.next <= s.compacted:
			ev, have = reflector.Event[int]{Kind: reflector.Resync}, true
		case i < len(s.history):
			ev, have = s.history[i], true
		case w.next <= s.rev:
			// Caught up while the revision moved elsewhere.
			ev, have = reflector.Event[int]{Kind: reflector.Progress, Revision: s.rev}, true
		}
		s.mu.Unlock()
		if !have {
			select {
			case <-ctx.Done():
				return
			case <-w.done:
				return
			case <-time.After(100 * time.Microsecond):
				continue
			}
		}
		times := 1
		if rng.IntN(20) == 0 {
			times = 2 // a duplicate
		}
		for range times {
			select {
			case w.ch <- ev:
			case <-ctx.Done():
				return
			case <-w.done:
				return
			}
		}
		if ev.Kind == reflector.Resync {
			return
		}
		w.next = ev.Revision + 1
	}
}

func (s *fakeSource) put(key string, v int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rev++
	s.state[key] = v
	s.history = append(s.history, reflector.Event[int]{Kind: reflector.Put, Key: key, Value: v, Revision: s.rev})
}

func (s *fakeSource) del(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.state[key]; !ok {
		return
	}
	s.rev++
	delete(s.state, key)
	s.history = append(s.history, reflector.Event[int]{Kind: reflector.Delete, Key: key, Revision: s.rev})
}

// bump moves the revision without a change of this source.
func (s *fakeSource) bump() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rev++
}

// revision returns the source's current revision.
func (s *fakeSource) revision() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev
}

// loseWatches ends every open watch.
func (s *fakeSource) loseWatches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.watches {
		w.close()
	}
	s.watches = nil
}

// compact forgets the history up to the current revision.
func (s *fakeSource) compact() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.history = nil
	s.compacted = s.rev
}

type fixture struct {
	reflector *reflector.Reflector[int, *obj]
	db        *statedb.DB
	table     statedb.RWTable[*obj]
	source    *fakeSource
	health    *reconcilertest.Health
}

// start runs a reflector of source into a new table until the test ends.
// Values that are multiples of 7 are filtered out; negative ones rejected.
func start(t *testing.T, source *fakeSource) *fixture {
	f := &fixture{db: statedb.New(), source: source, health: &reconcilertest.Health{}}
	var err error
	if f.table, err = statedb.NewTable(f.db, "objs", nameIndex); err != nil {
		t.Fatal(err)
	}
	r, err := reflector.New(f.db, reflector.Config[int, *obj]{
		Name:   "test",
		Source: source,
		Writer: reconciler.DesiredWriter[*obj]{
			Table:           f.table,
			Equal:           func(a, b *obj) bool { return a.Name == b.Name && a.Value == b.Value },
			SetObjectStatus: func(o *obj, s reconciler.Status) *obj { o.Status = s; return o },
		},
		Filter: func(_ string, v int) bool { return v%7 != 0 },
		Transform: func(key string, v int) (*obj, error) {
			if v < 0 {
				return nil, fmt.Errorf("value %d is negative", v)
			}
			return &obj{Name: key, Value: v}, nil
		},
		BatchSize:       8,
		BatchInterval:   time.Millisecond,
		RetryBackoffMin: time.Millisecond,
		RetryBackoffMax: 5 * time.Millisecond,
		Health:          f.health,
		Logger:          slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	f.reflector = r
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

// contents returns the table as key → value.
func (f *fixture) contents() (map[string]int, <-chan struct{}) {
	objs, watch := f.table.AllWatch(f.db.ReadTxn())
	got := map[string]int{}
	for o := range objs {
		got[o.Name] = o.Value
	}
	return got, watch
}

// waitFor waits until the table holds exactly want.
func (f *fixture) waitFor(t *testing.T, want map[string]int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		got, watch := f.contents()
		if maps.Equal(got, want) {
			return
		}
		select {
		case <-watch:
		case <-deadline:
			t.Fatalf("table %v\nwant %v", got, want)
		}
	}
}

// expected is what the table must hold for the source's state: every key
// whose value passes the filter (all values are valid at that point).
func (s *fakeSource) expected() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := map[string]int{}
	for k, v := range s.state {
		if v%7 != 0 {
			want[k] = v
		}
	}
	return want
}

// waitRevision waits until the reflector's Revision is want.
func (f *fixture) waitRevision(t *testing.T, want uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for f.reflector.Revision() != want {
		if time.Now().After(deadline) {
			t.Fatalf("Revision %d, want %d after 10s", f.reflector.Revision(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// The model test: random puts and deletes (some filtered out, some
// rejected), while the source loses watches, duplicates events, compacts
// its history, fails lists and moves its revision without a change of its
// own. Once the writes stop and every value is valid, the table equals the
// source's state, filtered: no delete is lost; and Revision reaches the
// source's revision, which the last change did not make.
func TestModel(t *testing.T) {
	for seed := range uint64(5) {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			src := newFakeSource()
			for i := range 20 {
				src.put(fmt.Sprintf("k%02d", i), i+1)
			}
			f := start(t, src)
			for step := range 3000 {
				key := fmt.Sprintf("k%02d", rng.IntN(40))
				switch n := rng.IntN(100); {
				case n < 25:
					src.del(key)
				case n < 28:
					src.put(key, -1) // rejected
				case n < 29:
					src.loseWatches()
				case n < 30:
					src.compact()
				case n < 31:
					src.mu.Lock()
					src.failList = 2
					src.mu.Unlock()
				case n < 36:
					src.bump()
				default:
					src.put(key, step)
				}
				if step%100 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
			// Make every value valid, then check.
			src.mu.Lock()
			var bad []string
			for k, v := range src.state {
				if v < 0 {
					bad = append(bad, k)
				}
			}
			src.mu.Unlock()
			for _, k := range bad {
				src.put(k, 1000)
			}
			f.waitFor(t, src.expected())
			f.waitRevision(t, src.revision())
			// The revision moves elsewhere: only a progress tells.
			src.bump()
			f.waitRevision(t, src.revision())
			// Healthy again once a list succeeds and nothing is rejected.
			f.health.WaitFor(t, reconcilertest.LevelOK, "")
		})
	}
}

// A relist leaves unchanged objects alone (their status stays), writes
// changed ones as Pending and deletes what is gone.
func TestRelistKeepsUnchanged(t *testing.T) {
	src := newFakeSource()
	src.put("a", 1)
	src.put("b", 2)
	src.put("c", 3)
	f := start(t, src)
	f.waitFor(t, map[string]int{"a": 1, "b": 2, "c": 3})
	if ok, _ := f.table.Initialized(f.db.ReadTxn()); !ok {
		t.Fatal("the table is not initialized after the first list")
	}

	// A reconciler marks everything Done.
	wtxn := f.db.WriteTxn(f.table)
	for o := range f.table.All(wtxn) {
		c := *o
		c.Status = reconciler.StatusDone()
		f.table.Insert(wtxn, &c)
	}
	wtxn.Commit()

	// While the watch is down, b changes and c is deleted; the history
	// is compacted, so only a relist can tell.
	src.loseWatches()
	src.put("b", 5)
	src.del("c")
	src.compact()
	f.waitFor(t, map[string]int{"a": 1, "b": 5})
	txn := f.db.ReadTxn()
	a, _, _ := f.table.Get(txn, nameIndex.Query("a"))
	b, _, _ := f.table.Get(txn, nameIndex.Query("b"))
	if a.Status.Kind != reconciler.StatusKindDone || b.Status.Kind != reconciler.StatusKindPending {
		t.Fatalf("after the relist a is %v (want Done, untouched), b is %v (want Pending)", a.Status, b.Status)
	}
}

// A value that Transform rejects is reported and skipped; the table keeps
// the last good version and the rest of the batch applies.
func TestRejectedKeepsLastGood(t *testing.T) {
	src := newFakeSource()
	src.put("a", 1)
	f := start(t, src)
	f.waitFor(t, map[string]int{"a": 1})
	src.put("a", -5)
	src.put("b", 2)
	f.waitFor(t, map[string]int{"a": 1, "b": 2})
	f.health.WaitFor(t, reconcilertest.LevelDegraded, "a: value -5 is negative")
	if got := f.reflector.Rejected(); len(got) != 1 || !strings.HasPrefix(got[0], "a: ") || !strings.Contains(got[0], "negative") {
		t.Fatalf("Rejected() = %q, want a's", got)
	}
	src.put("a", 3)
	f.waitFor(t, map[string]int{"a": 3, "b": 2})
	f.health.WaitFor(t, reconcilertest.LevelOK, "")
	if got := f.reflector.Rejected(); len(got) != 0 {
		t.Fatalf("Rejected() = %q after a good value", got)
	}
}

// Bad configs are refused with every problem named.
func TestNewErrors(t *testing.T) {
	_, err := reflector.New(statedb.New(), reflector.Config[int, *obj]{Name: "Bad Name", BatchSize: -1})
	if !errors.Is(err, reflector.ErrInvalidConfig) {
		t.Fatalf("New: %v", err)
	}
	for _, want := range []string{"Source is required", "Writer needs", "Transform is required", "must not be negative", "Bad Name"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// scriptedSource lists once and then sends the given events on every
// watch.
type scriptedSource struct {
	items  []reflector.Item[int]
	rev    uint64
	events []reflector.Event[int]
}

func (s *scriptedSource) List(context.Context) ([]reflector.Item[int], uint64, error) {
	return s.items, s.rev, nil
}

func (s *scriptedSource) Watch(ctx context.Context, after uint64) (<-chan reflector.Event[int], error) {
	ch := make(chan reflector.Event[int])
	go func() {
		defer close(ch)
		for _, ev := range s.events {
			select {
			case ch <- ev:
			case <-ctx.Done():
				return
			}
		}
		<-ctx.Done()
	}()
	return ch, nil
}

// Events at or below the listed revision, which a source may replay after
// a reconnect, are ignored: they never override what the list said.
func TestReplayedEventsIgnored(t *testing.T) {
	db := statedb.New()
	table, err := statedb.NewTable(db, "objs", nameIndex)
	if err != nil {
		t.Fatal(err)
	}
	src := &scriptedSource{
		items: []reflector.Item[int]{{Key: "a", Value: 2}},
		rev:   10,
		events: []reflector.Event[int]{
			{Kind: reflector.Put, Key: "a", Value: 1, Revision: 9},   // older than the list
			{Kind: reflector.Delete, Key: "a", Revision: 10},         // as old as the list
			{Kind: reflector.Put, Key: "z", Value: 26, Revision: 11}, // new
			{Kind: reflector.Put, Key: "y", Value: 25, Revision: 12}, // new
			{Kind: reflector.Progress, Revision: 12},                 // 12 is whole
		},
	}
	r, err := reflector.New(db, reflector.Config[int, *obj]{
		Name:   "test",
		Source: src,
		Writer: reconciler.DesiredWriter[*obj]{
			Table:           table,
			Equal:           func(a, b *obj) bool { return a.Value == b.Value },
			SetObjectStatus: func(o *obj, s reconciler.Status) *obj { o.Status = s; return o },
		},
		Transform:     func(key string, v int) (*obj, error) { return &obj{Name: key, Value: v}, nil },
		BatchInterval: time.Hour, // batches are committed by size or progress only
		BatchSize:     2,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	f := &fixture{db: db, table: table}
	// Without the rule the first batch would be a (deleted) and z, and y
	// would wait for a second.
	f.waitFor(t, map[string]int{"a": 2, "y": 25, "z": 26})
}

// Revision is the source revision whose changes are all in the table.
func TestRevision(t *testing.T) {
	src := newFakeSource()
	src.put("a", 1)
	f := start(t, src)
	f.waitFor(t, map[string]int{"a": 1})
	// The list's revision (1) is reached once its commit is visible.
	for f.reflector.Revision() < 1 {
		time.Sleep(time.Millisecond)
	}
	src.put("b", 2)
	src.del("a")
	f.waitFor(t, map[string]int{"b": 2})
	deadline := time.Now().Add(10 * time.Second)
	for f.reflector.Revision() != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("Revision %d, want 3", f.reflector.Revision())
		}
		time.Sleep(time.Millisecond)
	}
}
