package reflector_test

import (
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
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
	"github.com/steadystate/steadystate/reflector"
	"github.com/steadystate/steadystate/statedb"
)

// tk is a key of a table.
type tk struct{ table, key string }

// mop is one change of a multiSource transaction.
type mop struct {
	tk
	del bool
	val int
}

// mtxn is one revision of a multiSource: several keys of several tables.
type mtxn struct {
	rev uint64
	ops []mop
}

// multiSource is a source of three tables whose revisions are
// transactions of several keys, as etcd's. Its watch sends each
// revision's events in a random order, duplicates some, and marks the end
// of a revision with a Progress now and then (always once caught up). It
// can lose its watches, compact its history and fail lists. It keeps every
// transaction, so that a test can compute its state at any revision.
type multiSource struct {
	mu        sync.Mutex
	state     map[tk]int
	mod       map[tk]uint64 // the revision of each key's last change
	rev       uint64
	log       []mtxn // every transaction, in order (never compacted)
	compacted uint64 // a watch from at or below it gets Resync
	watches   []*fakeWatch
	failList  int
	seed      uint64
}

var multiTables = []string{"ta", "tb", "tc"}

func newMultiSource(seed uint64) *multiSource {
	return &multiSource{state: map[tk]int{}, mod: map[tk]uint64{}, seed: seed}
}

func (s *multiSource) List(context.Context) ([]reflector.Item[int], uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failList > 0 {
		s.failList--
		return nil, 0, errors.New("source unavailable")
	}
	var items []reflector.Item[int]
	for k, v := range s.state {
		items = append(items, reflector.Item[int]{Table: k.table, Key: k.key, Value: v, Revision: s.mod[k]})
	}
	return items, s.rev, nil
}

func (s *multiSource) Watch(ctx context.Context, after uint64) (<-chan reflector.Event[int], error) {
	w := &fakeWatch{ch: make(chan reflector.Event[int]), next: after + 1, done: make(chan struct{})}
	s.mu.Lock()
	s.watches = append(s.watches, w)
	s.seed++
	rng := rand.New(rand.NewPCG(s.seed, 3))
	s.mu.Unlock()
	go s.serve(ctx, w, rng)
	return w.ch, nil
}

func (s *multiSource) serve(ctx context.Context, w *fakeWatch, rng *rand.Rand) {
	defer close(w.ch)
	send := func(ev reflector.Event[int]) bool {
		select {
		case w.ch <- ev:
			return true
		case <-ctx.Done():
		case <-w.done:
		}
		return false
	}
	progressed := uint64(0)
	for {
		s.mu.Lock()
		var txn mtxn
		have, resync := false, w.next <= s.compacted
		if !resync {
			i, _ := slices.BinarySearchFunc(s.log, w.next, func(t mtxn, rev uint64) int {
				return int(int64(t.rev) - int64(rev))
			})
			if i < len(s.log) {
				txn, have = s.log[i], true
			}
		}
		rev := s.rev
		s.mu.Unlock()
		switch {
		case resync:
			send(reflector.Event[int]{Kind: reflector.Resync})
			return
		case have:
			ops := slices.Clone(txn.ops)
			rng.Shuffle(len(ops), func(i, j int) { ops[i], ops[j] = ops[j], ops[i] })
			for _, op := range ops {
				ev := reflector.Event[int]{Kind: reflector.Put, Table: op.table, Key: op.key, Value: op.val, Revision: txn.rev}
				if op.del {
					ev = reflector.Event[int]{Kind: reflector.Delete, Table: op.table, Key: op.key, Revision: txn.rev}
				}
				for range 1 + rng.IntN(10)/9 { // a duplicate now and then
					if !send(ev) {
						return
					}
				}
			}
			w.next = txn.rev + 1
			if rng.IntN(4) == 0 {
				if !send(reflector.Event[int]{Kind: reflector.Progress, Revision: txn.rev}) {
					return
				}
				progressed = txn.rev
			}
		case w.next <= rev && progressed < rev:
			// Caught up: every change up to rev was sent.
			if !send(reflector.Event[int]{Kind: reflector.Progress, Revision: rev}) {
				return
			}
			progressed = rev
		default:
			select {
			case <-ctx.Done():
				return
			case <-w.done:
				return
			case <-time.After(100 * time.Microsecond):
			}
		}
	}
}

// commit makes ops one revision (an empty one moves the revision only).
func (s *multiSource) commit(ops []mop) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rev++
	for _, op := range ops {
		if op.del {
			delete(s.state, op.tk)
		} else {
			s.state[op.tk] = op.val
		}
		s.mod[op.tk] = s.rev
	}
	s.log = append(s.log, mtxn{rev: s.rev, ops: ops})
}

func (s *multiSource) loseWatches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.watches {
		w.close()
	}
	s.watches = nil
}

func (s *multiSource) revision() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev
}

// at returns what the tables must hold for the source's state at rev: the
// values that pass the filter (not multiples of 7).
func (s *multiSource) at(rev uint64) map[tk]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := map[tk]int{}
	for _, t := range s.log {
		if t.rev > rev {
			break
		}
		for _, op := range t.ops {
			if op.del {
				delete(st, op.tk)
			} else {
				st[op.tk] = op.val
			}
		}
	}
	for k, v := range st {
		if v%7 == 0 {
			delete(st, k)
		}
	}
	return st
}

// multiFixture is a Multi of a multiSource into three tables.
type multiFixture struct {
	db     *statedb.DB
	tables map[string]statedb.RWTable[*obj]
	multi  *reflector.Multi[int]
	health *reconcilertest.Health
	paused *warnCounter // the reflector's log, counting its warnings of a source that paused within a revision
}

// commitHook calls a function after each commit of a reflector, from its
// goroutine: nothing else is committed while it runs.
type commitHook struct {
	reflector.NopMetrics
	after func()
}

func (h *commitHook) BatchCommitted(string, int, time.Duration) { h.after() }

func newMultiFixture(t testing.TB, src reflector.Source[int], batchSize int, interval time.Duration, metrics reflector.Metrics) *multiFixture {
	f := &multiFixture{db: statedb.New(), tables: map[string]statedb.RWTable[*obj]{}, health: &reconcilertest.Health{},
		paused: &warnCounter{Handler: slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}), match: "The source paused within a revision"}}
	var specs []reflector.TableSpec[int]
	for _, name := range multiTables {
		tbl, err := statedb.NewTable(f.db, name, nameIndex)
		if err != nil {
			t.Fatal(err)
		}
		f.tables[name] = tbl
		specs = append(specs, reflector.Into[int, *obj]{
			Table:     name,
			Writer:    objWriter(tbl),
			Filter:    func(_ string, v int) bool { return v%7 != 0 },
			Transform: func(key string, v int) (*obj, error) { return &obj{Name: key, Value: v}, nil },
		})
	}
	m, err := reflector.NewMulti(f.db, reflector.MultiConfig[int]{
		Name: "multi", Source: src, Tables: specs,
		BatchSize: batchSize, BatchInterval: interval,
		RetryBackoffMin: time.Millisecond, RetryBackoffMax: 5 * time.Millisecond,
		Metrics: metrics, Health: f.health,
		Logger: slog.New(f.paused),
	})
	if err != nil {
		t.Fatal(err)
	}
	f.multi = m
	return f
}

// warnCounter counts the records whose message starts with match.
type warnCounter struct {
	slog.Handler
	match string
	n     atomic.Int64
}

func (h *warnCounter) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.match) {
		h.n.Add(1)
	}
	return h.Handler.Handle(ctx, r)
}

func (f *multiFixture) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.multi.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func objWriter(t statedb.RWTable[*obj]) reconciler.DesiredWriter[*obj] {
	return reconciler.DesiredWriter[*obj]{
		Table:           t,
		Equal:           func(a, b *obj) bool { return a.Name == b.Name && a.Value == b.Value },
		SetObjectStatus: func(o *obj, s reconciler.Status) *obj { o.Status = s; return o },
	}
}

// snapshot returns every table's contents at one ReadTxn.
func (f *multiFixture) snapshot(txn statedb.ReadTxn) map[tk]int {
	got := map[tk]int{}
	for name, tbl := range f.tables {
		for o := range tbl.All(txn) {
			got[tk{name, o.Name}] = o.Value
		}
	}
	return got
}

// check fails unless the tables, read after Revision, hold the source's
// state at one revision at or past it: never part of a revision, never a
// mix of two, never behind the revision claimed.
func (f *multiFixture) check(t *testing.T, src *multiSource) error {
	claimed := f.multi.Revision()
	got := f.snapshot(f.db.ReadTxn())
	latest := src.revision()
	for rev := claimed; rev <= latest; rev++ {
		if maps.Equal(got, src.at(rev)) {
			return nil
		}
	}
	return fmt.Errorf("the tables hold no revision of the source from the claimed %d to %d:\n got %v\nat %d: %v",
		claimed, latest, got, claimed, src.at(claimed))
}

// The model test of the multi-table reflector: random transactions of
// several keys over three tables (some values filtered out), while the
// source loses watches, duplicates and reorders the events of a revision,
// compacts its history, fails lists and moves its revision without a
// change. After every commit, and whenever another goroutine looks, the
// tables hold the source's state at one revision at or past Revision;
// once the writes stop they hold the latest state and Revision is the
// source's revision.
func TestMultiModel(t *testing.T) {
	for seed := range uint64(6) {
		// Seeds 4 and 5: a batch interval of 2ms and commits that take up
		// to 3ms, so that revisions also end by quiet, and a slow commit
		// meets an open revision (a source that pauses within a revision
		// gets relisted).
		quick := seed >= 4
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 42))
			src := newMultiSource(seed)
			randomTxn := func(step int) []mop {
				var ops []mop
				seen := map[tk]bool{}
				for range 1 + rng.IntN(8) {
					k := tk{multiTables[rng.IntN(3)], fmt.Sprintf("k%02d", rng.IntN(15))}
					if seen[k] {
						continue // one change per key and revision, as in etcd
					}
					seen[k] = true
					ops = append(ops, mop{tk: k, del: rng.IntN(4) == 0, val: step*10 + rng.IntN(10)})
				}
				return ops
			}
			for i := range 10 {
				src.commit(randomTxn(i))
			}
			var mu sync.Mutex
			var failure error
			fail := func(err error) {
				mu.Lock()
				defer mu.Unlock()
				if failure == nil {
					failure = err
				}
			}
			var f *multiFixture
			hook := &commitHook{after: func() {
				if err := f.check(t, src); err != nil {
					fail(fmt.Errorf("after a commit: %w", err))
				}
				if quick {
					time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond) // the package rand: safe here
				}
			}}
			// BatchSize 5 splits the stream between revisions; the source
			// marks the end of revisions, so (but for the quick seeds)
			// BatchInterval is never what ends one here.
			interval := time.Hour
			if quick {
				interval = 2 * time.Millisecond
			}
			f = newMultiFixture(t, src, 5, interval, hook)
			f.run(t)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err := f.check(t, src); err != nil {
						fail(fmt.Errorf("seen by a reader: %w", err))
						return
					}
					time.Sleep(50 * time.Microsecond)
				}
			})
			for step := range 1500 {
				switch n := rng.IntN(100); {
				case n < 2:
					src.loseWatches()
				case n < 3:
					src.mu.Lock()
					src.compacted = src.rev
					src.mu.Unlock()
					src.loseWatches()
				case n < 4:
					src.mu.Lock()
					src.failList = 2
					src.mu.Unlock()
				case n < 10:
					src.commit(nil) // the revision moves elsewhere
				default:
					src.commit(randomTxn(step + 10))
				}
				if step%50 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
			want := src.revision()
			deadline := time.Now().Add(20 * time.Second)
			for f.multi.Revision() != want {
				if time.Now().After(deadline) {
					t.Fatalf("Revision %d, want %d after 20s", f.multi.Revision(), want)
				}
				time.Sleep(time.Millisecond)
			}
			close(stop)
			wg.Wait()
			// The quick seeds' source does not mark its revisions, and
			// they end by 2 ms of quiet: a pause of its goroutine within a
			// revision (starved on a loaded machine), or of the reflector's
			// between two of its events, lets the reflector take part of
			// the revision as whole, by the documented rule, until the rest
			// comes late and it lists again, or the watch is lost and it
			// lists anyway (then without the warning of a late event). So
			// for them a torn state on the way is the rule's, not a fault;
			// they check where the reflector ends (below); seeds 0-3 check
			// that nothing torn is ever seen when quiet ends no revision,
			// and the synctest tests of whole_test.go and marked_test.go
			// check exactly when quiet ends one and when it may not.
			if failure != nil && quick {
				t.Logf("a torn state seen on the way (revisions ended by quiet; the source paused within a revision %d times by the reflector's warnings): %v", f.paused.n.Load(), failure)
				failure = nil
			}
			if failure != nil {
				t.Fatal(failure)
			}
			if got, exp := f.snapshot(f.db.ReadTxn()), src.at(want); !maps.Equal(got, exp) {
				t.Fatalf("at the end: tables %v\nwant %v", got, exp)
			}
			f.health.WaitFor(t, reconcilertest.LevelOK, "")
		})
	}
}

// Bad configs are refused with every problem named.
func TestNewMultiErrors(t *testing.T) {
	db := statedb.New()
	a, _ := statedb.NewTable(db, "ta", nameIndex)
	good := reflector.Into[int, *obj]{Table: "a", Writer: objWriter(a), Transform: func(string, int) (*obj, error) { return nil, nil }}
	cases := []struct {
		name string
		cfg  reflector.MultiConfig[int]
		want []string
	}{
		{"empty", reflector.MultiConfig[int]{Name: "m"}, []string{"Source is required", "at least one Into"}},
		{"bad into", reflector.MultiConfig[int]{Name: "m", Source: newMultiSource(0), Tables: []reflector.TableSpec[int]{
			reflector.Into[int, *obj]{Table: "x"}}}, []string{`table "x": the Writer needs`, "Transform is required"}},
		{"a name twice", reflector.MultiConfig[int]{Name: "m", Source: newMultiSource(0), Tables: []reflector.TableSpec[int]{
			good, good}}, []string{`table "a": named twice`}},
		{"a statedb table twice", reflector.MultiConfig[int]{Name: "m", Source: newMultiSource(0), Tables: []reflector.TableSpec[int]{
			good, reflector.Into[int, *obj]{Table: "b", Writer: objWriter(a), Transform: good.Transform}}},
			[]string{`table "b": its statedb table is also "a"'s`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := reflector.NewMulti(db, tc.cfg)
			if !errors.Is(err, reflector.ErrInvalidConfig) {
				t.Fatalf("NewMulti: %v, want ErrInvalidConfig", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// The documented defaults of Config and MultiConfig.
func TestDefaults(t *testing.T) {
	if reflector.DefaultBatchSize != 1000 || reflector.DefaultBatchInterval != 50*time.Millisecond {
		t.Fatalf("DefaultBatchSize %d, DefaultBatchInterval %v; documented 1000 and 50ms", reflector.DefaultBatchSize, reflector.DefaultBatchInterval)
	}
}
