package reflector

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// The tests of putRun: a first list's Puts into empty tables, prepared
// ahead on a goroutine of their own, must end as one put after the other.

// pobj is the object of these tests. A value v makes primary key
// "p<v/100>", so values of one hundred share a key; v%100 picks what
// Filter and Transform do with it (see pipeFilter and pipeTransform).
type pobj struct {
	PK     string
	Key    string // the source key whose value made it
	Value  int
	Tag    int // unique in a table of pipeRig's unique: some writes fail
	Status reconciler.Status
}

// What a value's v%100 makes of it.
const (
	codeFiltered       = 3  // Filter drops it
	codeFilterPanics   = 4  // Filter panics: rejected
	codeTransformError = 5  // Transform fails: rejected
	codeTransformPanic = 6  // Transform panics: rejected
	codeSharedTag      = 70 // 70, 71, 72 share a tag (-code) with every other of theirs
)

// pipeHooks makes a rig's indexes and callbacks panic or count.
type pipeHooks struct {
	pkPanic     atomic.Int64 // the primary index panics on this value (-1: none)
	statusPanic atomic.Int64 // SetObjectStatus panics on this value (-1: none)
	statuses    atomic.Int64 // SetObjectStatus calls: the objects written so far
	goexit      atomic.Int64 // Transform calls runtime.Goexit on this value (-1: none)

	mu       sync.Mutex
	calls    []pipeCall // Filter's and Transform's calls, if record
	record   bool
	inFlight atomic.Int32
	overlap  atomic.Bool // two calls of Filter or Transform overlapped
}

// pipeCall is one call of Filter ('F') or Transform ('T').
type pipeCall struct {
	what    byte
	table   string
	key     string
	g       string // the goroutine's id
	written int64  // objects written when it was made
}

func newPipeHooks() *pipeHooks {
	h := &pipeHooks{}
	h.pkPanic.Store(-1)
	h.statusPanic.Store(-1)
	h.goexit.Store(-1)
	return h
}

// enter notes a call of Filter or Transform; the caller defers leave.
func (h *pipeHooks) enter(what byte, table, key string) {
	if h.inFlight.Add(1) > 1 {
		h.overlap.Store(true)
	}
	if !h.record {
		return
	}
	h.mu.Lock()
	h.calls = append(h.calls, pipeCall{what: what, table: table, key: key, g: goid(), written: h.statuses.Load()})
	h.mu.Unlock()
}

func (h *pipeHooks) leave() { h.inFlight.Add(-1) }

func (h *pipeHooks) recorded() []pipeCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

// goid returns the calling goroutine's id.
func goid() string {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	return string(bytes.Fields(b)[1])
}

func pipeFilter(h *pipeHooks, table string) func(string, int) bool {
	return func(key string, v int) bool {
		h.enter('F', table, key)
		defer h.leave()
		switch v % 100 {
		case codeFiltered:
			return false
		case codeFilterPanics:
			panic("Filter panics")
		}
		return true
	}
}

func pipeTransform(h *pipeHooks, table string) func(string, int) (*pobj, error) {
	return func(key string, v int) (*pobj, error) {
		h.enter('T', table, key)
		defer h.leave()
		if int64(v) == h.goexit.Load() {
			runtime.Goexit() // as t.Fatal in a test's Transform does
		}
		tag := v
		switch r := v % 100; {
		case r == codeTransformError:
			return nil, fmt.Errorf("value %d refused", v)
		case r == codeTransformPanic:
			panic(fmt.Sprintf("Transform panics on %d", v))
		case r >= codeSharedTag && r < codeSharedTag+3:
			tag = -r
		}
		return &pobj{PK: fmt.Sprint("p", v/100), Key: key, Value: v, Tag: tag}, nil
	}
}

// pipeSource lists a fixed list; its watch sends nothing.
type pipeSource struct {
	mu    sync.Mutex
	items []Item[int]
	rev   uint64
}

func (s *pipeSource) set(rev uint64, items []Item[int]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.items, s.rev = slices.Clone(items), rev
}

func (s *pipeSource) List(context.Context) ([]Item[int], uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.items), s.rev, nil // listEvents sorts its items
}

func (s *pipeSource) Watch(context.Context, uint64) (<-chan Event[int], error) {
	return nil, nil // never an event: Run waits for its context
}

// pipeMetrics records the calls of Metrics, without durations.
type pipeMetrics struct {
	mu    sync.Mutex
	calls []string
}

func (m *pipeMetrics) add(s string) { m.mu.Lock(); m.calls = append(m.calls, s); m.mu.Unlock() }
func (m *pipeMetrics) Events(_ string, n int) {
	m.add(fmt.Sprint("events ", n))
}
func (m *pipeMetrics) BatchCommitted(_ string, n int, _ time.Duration) {
	m.add(fmt.Sprint("batch ", n))
}
func (m *pipeMetrics) Relisted(_, reason string) { m.add("relisted " + reason) }
func (m *pipeMetrics) Rejected(_ string, n int)  { m.add(fmt.Sprint("rejected ", n)) }
func (m *pipeMetrics) all() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.calls)
}

// pipeHealth records the health reports.
type pipeHealth struct {
	mu      sync.Mutex
	reports []string
}

func (h *pipeHealth) add(s string)     { h.mu.Lock(); h.reports = append(h.reports, s); h.mu.Unlock() }
func (h *pipeHealth) OK(s string)      { h.add("OK " + s) }
func (h *pipeHealth) Stopped(s string) { h.add("Stopped " + s) }
func (h *pipeHealth) Degraded(r string, err error) {
	h.add("Degraded " + r + " / " + err.Error())
}
func (h *pipeHealth) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.reports)
}

// pipeRig is a Multi of tables of pobj, each filtered and transformed
// with the hooks, from a pipeSource.
type pipeRig struct {
	db      *statedb.DB
	names   []string
	tables  map[string]statedb.RWTable[*pobj]
	hooks   *pipeHooks
	src     *pipeSource
	metrics *pipeMetrics
	health  *pipeHealth
	m       *Multi[int]
}

// newPipeRig makes a rig of tables names; those in unique have a unique
// index on Tag.
func newPipeRig(t *testing.T, names []string, unique ...string) *pipeRig {
	r := &pipeRig{db: statedb.New(), names: names, tables: map[string]statedb.RWTable[*pobj]{}, hooks: newPipeHooks(),
		src: &pipeSource{}, metrics: &pipeMetrics{}, health: &pipeHealth{}}
	h := r.hooks
	primary := statedb.Index[*pobj, string]{
		Name: "pk",
		FromObject: func(o *pobj) index.KeySet {
			if int64(o.Value) == h.pkPanic.Load() {
				panic(fmt.Sprintf("primary FromObject of %s=%d", o.Key, o.Value))
			}
			return index.NewKeySet(index.String(o.PK))
		},
		FromKey: index.String,
		Unique:  true,
	}
	tag := statedb.Index[*pobj, int]{
		Name:       "tag",
		FromObject: func(o *pobj) index.KeySet { return index.NewKeySet(index.Int(o.Tag)) },
		FromKey:    index.Int,
		Unique:     true,
	}
	var specs []TableSpec[int]
	for _, name := range names {
		var secondary []statedb.Indexer[*pobj]
		if slices.Contains(unique, name) {
			secondary = append(secondary, tag)
		}
		tbl, err := statedb.NewTable(r.db, name, primary, secondary...)
		if err != nil {
			t.Fatal(err)
		}
		r.tables[name] = tbl
		specs = append(specs, Into[int, *pobj]{
			Table: name,
			Writer: reconciler.DesiredWriter[*pobj]{
				Table: tbl,
				Equal: func(a, b *pobj) bool { return a.PK == b.PK && a.Value == b.Value && a.Tag == b.Tag },
				SetObjectStatus: func(o *pobj, s reconciler.Status) *pobj {
					if int64(o.Value) == h.statusPanic.Load() {
						panic(fmt.Sprintf("SetObjectStatus of %s=%d", o.Key, o.Value))
					}
					h.statuses.Add(1)
					o.Status = s
					return o
				},
			},
			Filter:    pipeFilter(h, name),
			Transform: pipeTransform(h, name),
		})
	}
	var err error
	r.m, err = NewMulti(r.db, MultiConfig[int]{
		Name: "pipe", Source: r.src, Tables: specs,
		Metrics: r.metrics, Health: r.health,
		RetryBackoffMin: time.Millisecond, RetryBackoffMax: time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	// A build of the maps outlives a commit until settled.
	t.Cleanup(func() {
		for _, f := range r.m.fills {
			f.settle()
		}
	})
	return r
}

// fill returns the rig's fill of table name.
func (r *pipeRig) fill(name string) *fill[int, *pobj] { return r.m.byName[name].(*fill[int, *pobj]) }

// relist lists the source once, as Run does, with putRun preparing ahead
// from above Puts of a table.
func (r *pipeRig) relist(t *testing.T, above int, reason string) {
	t.Helper()
	defer setPipelineAbove(above)()
	if err := r.m.relist(context.Background(), reason); err != nil {
		t.Fatal(err)
	}
}

// setPipelineAbove sets pipelineAbove; the function returned restores it.
func setPipelineAbove(n int) (restore func()) {
	old, procs := pipelineAbove, runtime.GOMAXPROCS(0)
	pipelineAbove = n
	if n < 1<<30 && procs < 2 {
		runtime.GOMAXPROCS(2) // putRun prepares ahead only with two
	}
	return func() {
		pipelineAbove = old
		runtime.GOMAXPROCS(procs)
	}
}

// contents returns table name's objects; with exact, the key that made
// each and its revision too.
func (r *pipeRig) contents(name string, exact bool) []string {
	var out []string
	for o, rev := range r.tables[name].All(r.db.ReadTxn()) {
		s := fmt.Sprintf("%s value=%d tag=%d %v", o.PK, o.Value, o.Tag, o.Status.Kind)
		if exact {
			s += fmt.Sprintf(" key=%s rev=%d", o.Key, rev)
		}
		out = append(out, s)
	}
	return out
}

// memory returns the fill of table name's maps, settled.
func (r *pipeRig) memory(name string) (held map[string]kept[int], owners map[string][]string, rejected map[string]string) {
	f := r.fill(name)
	f.settle()
	return f.held, f.owners, f.rejected
}

// compareRigs fails unless got holds what want holds: the tables of names
// (exact: see contents), the rejections, the fills' maps and counts, the
// Revision, and with history (and every table) the metrics and health
// reports so far.
func compareRigs(t *testing.T, what string, got, want *pipeRig, names []string, exact, history bool) {
	t.Helper()
	for _, name := range names {
		if g, w := got.contents(name, exact), want.contents(name, exact); !slices.Equal(g, w) {
			t.Fatalf("%s: table %s differs from one put after the other's: %s", what, name, firstDiff(g, w))
		}
		gh, gown, grej := got.memory(name)
		wh, wown, wrej := want.memory(name)
		if !maps.Equal(gh, wh) || !maps.EqualFunc(gown, wown, slices.Equal) || !maps.Equal(grej, wrej) {
			t.Fatalf("%s: table %s: held %d, owners %d, rejected %v; want %d, %d, %v", what, name, len(gh), len(gown), grej, len(wh), len(wown), wrej)
		}
		if g, w := got.fill(name).objects(), want.fill(name).objects(); g != w {
			t.Fatalf("%s: table %s: objects() %d, want %d", what, name, g, w)
		}
	}
	var gotRej, wantRej []Rejection
	for _, rej := range got.m.Rejected() {
		if slices.Contains(names, rej.Table) {
			gotRej = append(gotRej, rej)
		}
	}
	for _, rej := range want.m.Rejected() {
		if slices.Contains(names, rej.Table) {
			wantRej = append(wantRej, rej)
		}
	}
	if !slices.Equal(gotRej, wantRej) {
		t.Fatalf("%s: rejected %v, want %v", what, gotRej, wantRej)
	}
	if g, w := got.m.Revision(), want.m.Revision(); g != w {
		t.Fatalf("%s: Revision %d, want %d", what, g, w)
	}
	if !history || len(names) < len(got.names) {
		return // the metrics and health count every table
	}
	if g, w := got.metrics.all(), want.metrics.all(); !slices.Equal(g, w) {
		t.Fatalf("%s: metrics %v, want %v", what, g, w)
	}
	if g, w := got.health.all(), want.health.all(); !slices.Equal(g, w) {
		t.Fatalf("%s: health %v, want %v", what, g, w)
	}
}

func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("at %d: %q, want %q", i, got[i], want[i])
		}
	}
	return fmt.Sprintf("%d objects, want %d", len(got), len(want))
}

// pipeListSpec says what pipeItems makes.
type pipeListSpec struct {
	n         int     // items
	weights   []int   // of each table
	collide   float64 // how often an item takes an earlier item's primary key
	odd       float64 // how often a value is filtered out, rejected or panics
	revisions bool    // items of several revisions: a table's Puts come in several runs
	sharedKey bool    // the tables' keys are named alike: their Puts interleave
}

// pipeItems makes a random list of tables names by spec.
func pipeItems(rng *rand.Rand, names []string, spec pipeListSpec, rev uint64) []Item[int] {
	total := 0
	for _, w := range spec.weights {
		total += w
	}
	ids := map[string][]int{} // of each table's values so far
	var items []Item[int]
	block, back := 1+rng.IntN(700), uint64(0)
	for i := range spec.n {
		pick := rng.IntN(total)
		ti := 0
		for pick >= spec.weights[ti] {
			pick -= spec.weights[ti]
			ti++
		}
		table := names[ti]
		v := 100*i + 10 + rng.IntN(60) // a key of its own, and a value that passes
		if prev := ids[table]; len(prev) > 0 && rng.Float64() < spec.collide {
			other := prev[rng.IntN(len(prev))]
			if rng.IntN(2) == 0 {
				v = other // an equal object
			} else {
				v = other/100*100 + 10 + rng.IntN(60)
			}
		}
		if rng.Float64() < spec.odd {
			v = v/100*100 + []int{codeFiltered, codeFilterPanics, codeTransformError, codeTransformPanic,
				codeSharedTag, codeSharedTag + 1, codeSharedTag + 2}[rng.IntN(7)]
		}
		ids[table] = append(ids[table], v)
		key := fmt.Sprintf("%s%05d", table, i)
		if spec.sharedKey {
			key = fmt.Sprintf("k%05d", i)
		}
		if spec.revisions && i%block == 0 {
			block, back = 1+rng.IntN(700), uint64(rng.IntN(3))
		}
		items = append(items, Item[int]{Table: table, Key: key, Value: v, Revision: rev - back})
	}
	return items
}

// nextList changes a list: some keys go, some values change (their
// primary key too, now and then), some keys come.
func nextList(rng *rand.Rand, items []Item[int], names []string, rev uint64) []Item[int] {
	var out []Item[int]
	for _, it := range items {
		switch rng.IntN(10) {
		case 0:
			continue
		case 1:
			it.Value = it.Value/100*100 + 10 + rng.IntN(60)
		case 2:
			it.Value = rng.IntN(len(items)+1)*100 + 10 + rng.IntN(60)
		}
		it.Revision = rev
		out = append(out, it)
	}
	for i := range len(items) / 10 {
		out = append(out, Item[int]{Table: names[rng.IntN(len(names))], Key: fmt.Sprintf("new%05d", i),
			Value: rng.IntN(len(items)+1)*100 + 10 + rng.IntN(60), Revision: rev})
	}
	return out
}
