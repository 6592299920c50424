package filesource_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/internal/memtest"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
	"github.com/steadystate/steadystate/reflector"
	"github.com/steadystate/steadystate/reflector/filesource"
	"github.com/steadystate/steadystate/statedb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The test format: a first line "count N", then N lines "TABLE KEY VALUE".
// A file cut short does not decode, so a half-written file that got
// through would be counted as rejected.
func decode(path string, data []byte) ([]reflector.Item[int], error) {
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	n, err := strconv.Atoi(strings.TrimPrefix(lines[0], "count "))
	if err != nil || !strings.HasPrefix(lines[0], "count ") {
		return nil, fmt.Errorf("%s:1: want \"count N\", have %q", path, lines[0])
	}
	var items []reflector.Item[int]
	for i, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("%s:%d: want TABLE KEY VALUE, have %q", path, i+2, line)
		}
		v, err := strconv.Atoi(f[2])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: value %q: %v", path, i+2, f[2], err)
		}
		// Copies, not pieces of data: an item kept from a version must
		// not hold that version's whole text (TestMemoryAfterShrink).
		items = append(items, reflector.Item[int]{Table: strings.Clone(f[0]), Key: strings.Clone(f[1]), Value: v})
	}
	if len(items) != n {
		return nil, fmt.Errorf("%s: %d entries, the count says %d", path, len(items), n)
	}
	return items, nil
}

// file renders a version: table → key → value.
func file(objs map[string]map[string]int) string {
	var lines []string
	for table, kv := range objs {
		for k, v := range kv {
			lines = append(lines, fmt.Sprintf("%s %s %d", table, k, v))
		}
	}
	slices.Sort(lines)
	return fmt.Sprintf("count %d\n%s\n", len(lines), strings.Join(lines, "\n"))
}

// renameInto writes data to a new file beside path and renames it over
// path, as editors and ConfigMap updates do.
func renameInto(t *testing.T, path, data string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// counts counts the source's reads.
type counts struct {
	mu                         sync.Mutex
	loaded, rejected, deferred int
	lastObjects, lastChanged   int
}

func (c *counts) Loaded(_ string, objects, changed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loaded++
	c.lastObjects, c.lastChanged = objects, changed
}
func (c *counts) Rejected(string) { c.mu.Lock(); c.rejected++; c.mu.Unlock() }
func (c *counts) Deferred(string) { c.mu.Lock(); c.deferred++; c.mu.Unlock() }

func (c *counts) get() (loaded, rejected, deferred, changed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loaded, c.rejected, c.deferred, c.lastChanged
}

// waitFor polls cond until it holds, for at most 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 10s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitDegraded waits for a Degraded report whose error contains substr.
func (f *fixture) waitDegraded(t *testing.T, substr string) {
	t.Helper()
	waitFor(t, "a Degraded report with "+substr, func() bool {
		for _, r := range f.health.Reports() {
			if r.Level == reconcilertest.LevelDegraded && r.Err != nil && strings.Contains(r.Err.Error(), substr) {
				return true
			}
		}
		return false
	})
}

type fixture struct {
	path   string
	src    *filesource.Source[int]
	counts *counts
	health *reconcilertest.Health
}

func newFixture(t *testing.T, equal bool) *fixture {
	f := &fixture{path: filepath.Join(t.TempDir(), "desired.txt"), counts: &counts{}, health: &reconcilertest.Health{}}
	cfg := filesource.Config[int]{Path: f.path, Decode: decode, SettleTime: 50 * time.Millisecond, PollInterval: time.Hour,
		Metrics: f.counts, Health: f.health}
	if equal {
		cfg.Equal = func(a, b int) bool { return a == b }
	}
	var err error
	if f.src, err = filesource.New(cfg); err != nil {
		t.Fatal(err)
	}
	return f
}

// listAsync runs List in the background.
func (f *fixture) listAsync(ctx context.Context) chan listResult {
	res := make(chan listResult, 1)
	go func() {
		items, rev, err := f.src.List(ctx)
		res <- listResult{items, rev, err}
	}()
	return res
}

type listResult struct {
	items []reflector.Item[int]
	rev   uint64
	err   error
}

func itemsOf(items []reflector.Item[int]) map[string]map[string]int {
	out := map[string]map[string]int{}
	for _, it := range items {
		if out[it.Table] == nil {
			out[it.Table] = map[string]int{}
		}
		out[it.Table][it.Key] = it.Value
	}
	return out
}

// Before the first good version List waits: a missing file, an empty one
// and one that does not decode are reported (health Degraded naming the
// problem, once each) and List goes on waiting; the first good version is
// listed at revision 1.
func TestListWaitsForAGoodFile(t *testing.T) {
	f := newFixture(t, true)
	res := f.listAsync(t.Context())
	f.waitDegraded(t, "no such file")
	renameInto(t, f.path, "  \n")
	f.waitDegraded(t, "empty")
	renameInto(t, f.path, "count 1\na b x\n")
	f.waitDegraded(t, "desired.txt:2: value \"x\"")
	select {
	case r := <-res:
		t.Fatalf("List returned before a good version: %+v", r)
	default:
	}
	want := map[string]map[string]int{"a": {"k1": 1, "k2": 2}, "b": {"k1": 3}}
	renameInto(t, f.path, file(want))
	r := <-res
	if r.err != nil || r.rev != 1 || fmt.Sprint(itemsOf(r.items)) != fmt.Sprint(want) {
		t.Fatalf("List: %v at %d, %v; want %v at 1", itemsOf(r.items), r.rev, r.err, want)
	}
	f.health.WaitFor(t, reconcilertest.LevelOK, "version 1")
	if _, rejected, _, _ := f.counts.get(); rejected != 3 {
		t.Fatalf("%d rejections counted, want 3 (missing, empty, bad value)", rejected)
	}
	// A List ends with its context.
	ctx, cancel := context.WithCancel(t.Context())
	g := newFixture(t, true)
	res = g.listAsync(ctx)
	cancel()
	if r := <-res; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("List after cancel: %v", r.err)
	}
}

// collect gathers a watch's events until a Progress.
func collect(t *testing.T, events <-chan reflector.Event[int]) []reflector.Event[int] {
	t.Helper()
	var out []reflector.Event[int]
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("the watch ended after %v", out)
			}
			out = append(out, ev)
			if ev.Kind == reflector.Progress {
				return out
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no Progress after 10s; events %v", out)
		}
	}
}

// The watch sends each new version as its difference from the one before
// at one revision, then a Progress: with Equal, only the keys whose value
// changed; a version that changes nothing (a new comment) sends nothing and
// keeps the revision; a bad version keeps the last good one and is
// reported once.
func TestWatchSendsTheDifference(t *testing.T) {
	f := newFixture(t, true)
	renameInto(t, f.path, file(map[string]map[string]int{"a": {"k1": 1, "k2": 2}, "b": {"k1": 3}}))
	_, rev, err := f.src.List(t.Context())
	if err != nil || rev != 1 {
		t.Fatalf("List: %d, %v", rev, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events, err := f.src.Watch(ctx, rev)
	if err != nil {
		t.Fatal(err)
	}
	renameInto(t, f.path, file(map[string]map[string]int{"a": {"k1": 1, "k2": 20}, "b": {"k2": 4}}))
	got := collect(t, events)
	want := []reflector.Event[int]{
		{Kind: reflector.Delete, Table: "b", Key: "k1", Revision: 2},
		{Kind: reflector.Put, Table: "a", Key: "k2", Value: 20, Revision: 2},
		{Kind: reflector.Put, Table: "b", Key: "k2", Value: 4, Revision: 2},
		{Kind: reflector.Progress, Revision: 2},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %v\nwant %v", got, want)
	}

	// The same objects in another order: read, nothing changed.
	loaded, _, _, _ := f.counts.get()
	renameInto(t, f.path, "count 3\nb k2 4\na k1 1\na k2 20\n")
	waitFor(t, "the reordered file read", func() bool { l, _, _, _ := f.counts.get(); return l > loaded })
	if _, _, _, changed := f.counts.get(); changed != 0 || f.src.Revision() != 2 {
		t.Fatalf("a reordered file: %d changed, revision %d; want 0 and 2", changed, f.src.Revision())
	}

	// A bad version: reported once, nothing sent; the next good one is.
	renameInto(t, f.path, "count 2\na k1 1\n")
	f.waitDegraded(t, "1 entries, the count says 2")
	renameInto(t, f.path, "count 1\na k1 5\n")
	got = collect(t, events)
	want = []reflector.Event[int]{
		{Kind: reflector.Delete, Table: "a", Key: "k2", Revision: 3},
		{Kind: reflector.Delete, Table: "b", Key: "k2", Revision: 3},
		{Kind: reflector.Put, Table: "a", Key: "k1", Value: 5, Revision: 3},
		{Kind: reflector.Progress, Revision: 3},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after a bad version: events %v\nwant %v", got, want)
	}
	if _, rejected, _, _ := f.counts.get(); rejected != 1 {
		t.Fatalf("%d rejections, want 1", rejected)
	}
	f.health.WaitFor(t, reconcilertest.LevelOK, "version 3")
}

// Without Equal every key of a new version is sent.
func TestWatchWithoutEqual(t *testing.T) {
	f := newFixture(t, false)
	renameInto(t, f.path, file(map[string]map[string]int{"a": {"k1": 1, "k2": 2}}))
	_, rev, err := f.src.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events, _ := f.src.Watch(ctx, rev)
	renameInto(t, f.path, file(map[string]map[string]int{"a": {"k1": 1, "k2": 3}}))
	if got := collect(t, events); len(got) != 3 || got[0].Key != "k1" || got[1].Key != "k2" {
		t.Fatalf("events %v, want both keys and a Progress", got)
	}
}

// A watch from a revision that is not the latest good version's says
// Resync.
func TestWatchFromAnOldRevision(t *testing.T) {
	f := newFixture(t, true)
	renameInto(t, f.path, file(map[string]map[string]int{"a": {"k": 1}}))
	if _, _, err := f.src.List(t.Context()); err != nil {
		t.Fatal(err)
	}
	events, _ := f.src.Watch(t.Context(), 7)
	if ev := <-events; ev.Kind != reflector.Resync {
		t.Fatalf("first event %v, want Resync", ev)
	}
	if _, ok := <-events; ok {
		t.Fatal("the watch went on after Resync")
	}
}

// A careless writer (truncate, then pieces with pauses, one longer than
// the settle time, holding the file open) never has a half-written file
// read: nothing is rejected, and every version the watch sends is whole.
func TestHalfWrittenFilesAreNeverRead(t *testing.T) {
	f := newFixture(t, true)
	renameInto(t, f.path, file(map[string]map[string]int{"a": {"m": 0}}))
	_, rev, err := f.src.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events, _ := f.src.Watch(ctx, rev)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 1; i <= 5; i++ {
		objs := map[string]map[string]int{"a": {"m": i}}
		for k := range 50 {
			objs["a"][fmt.Sprintf("r%02d", k)] = k
		}
		writeSlowly(t, f.path, file(objs), rng, 150*time.Millisecond)
		got := collect(t, events)
		var m int
		for _, ev := range got {
			if ev.Key == "m" {
				m = ev.Value
			}
		}
		if m != i {
			t.Fatalf("version %d: events %v", i, got)
		}
	}
	if _, rejected, deferred, _ := f.counts.get(); rejected != 0 {
		t.Fatalf("%d versions rejected (%d reads deferred): a half-written file was read", rejected, deferred)
	}
}

// writeSlowly writes data to path in place: truncate, then four pieces
// cut at random, with short pauses and one of longPause, holding the file
// open throughout.
func writeSlowly(t *testing.T, path, data string, rng *rand.Rand, longPause time.Duration) {
	t.Helper()
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cuts := []int{0, rng.IntN(len(data)), rng.IntN(len(data)), rng.IntN(len(data)), len(data)}
	slices.Sort(cuts)
	long := rng.IntN(4)
	for i := range 4 {
		pause := time.Duration(rng.Int64N(int64(2 * time.Millisecond)))
		if i == long {
			pause = longPause
		}
		time.Sleep(pause)
		if _, err := fh.WriteString(data[cuts[i]:cuts[i+1]]); err != nil {
			t.Fatal(err)
		}
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
}

// Reload reads the file now: here a symlink's target in another directory
// changed, which the directory watch does not see.
func TestReload(t *testing.T) {
	f := newFixture(t, true)
	target := filepath.Join(t.TempDir(), "real.txt")
	if err := os.WriteFile(target, []byte(file(map[string]map[string]int{"a": {"k": 1}})), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, f.path); err != nil {
		t.Fatal(err)
	}
	_, rev, err := f.src.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events, _ := f.src.Watch(ctx, rev)
	renameInto(t, target, file(map[string]map[string]int{"a": {"k": 2}}))
	// Older than the settle time, as a file written a while ago.
	old := time.Now().Add(-time.Second)
	os.Chtimes(target, old, old)
	f.src.Reload()
	if got := collect(t, events); len(got) != 2 || got[0].Value != 2 {
		t.Fatalf("after Reload: %v", got)
	}
}

// Bad configs are refused with every problem named.
func TestNewErrors(t *testing.T) {
	_, err := filesource.New(filesource.Config[int]{SettleTime: -1})
	if !errors.Is(err, filesource.ErrInvalidConfig) {
		t.Fatalf("New: %v", err)
	}
	for _, want := range []string{"Path is required", "Decode function is required", "must not be negative"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// The documented defaults.
func TestDefaults(t *testing.T) {
	if filesource.DefaultSettleTime != 500*time.Millisecond || filesource.DefaultPollInterval != 10*time.Second {
		t.Fatalf("defaults %v, %v; the doc says 500ms and 10s", filesource.DefaultSettleTime, filesource.DefaultPollInterval)
	}
}

// The file's versions reach the tables of a reflector.Multi, each version
// in one commit at its revision.
func TestWithAMultiReflector(t *testing.T) {
	f := newFixture(t, true)
	renameInto(t, f.path, file(map[string]map[string]int{"a": {"k1": 1}, "b": {"k2": 2}}))
	db := statedb.New()
	tables := map[string]statedb.RWTable[*obj]{}
	var specs []reflector.TableSpec[int]
	for _, name := range []string{"a", "b"} {
		tbl, err := statedb.NewTable(db, name, nameIndex)
		if err != nil {
			t.Fatal(err)
		}
		tables[name] = tbl
		specs = append(specs, reflector.Into[int, *obj]{Table: name,
			Writer: reconciler.DesiredWriter[*obj]{Table: tbl, Equal: func(a, b *obj) bool { return *a == *b },
				SetObjectStatus: func(o *obj, _ reconciler.Status) *obj { return o }},
			Transform: func(key string, v int) (*obj, error) { return &obj{Name: key, Value: v}, nil }})
	}
	m, err := reflector.NewMulti(db, reflector.MultiConfig[int]{Name: "file", Source: f.src, Tables: specs})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	contents := func() string {
		txn := db.ReadTxn()
		var out []string
		for _, name := range []string{"a", "b"} {
			for o := range tables[name].All(txn) {
				out = append(out, fmt.Sprintf("%s/%s=%d", name, o.Name, o.Value))
			}
		}
		return strings.Join(out, " ")
	}
	waitFor(t, "the first version", func() bool { return m.Revision() == 1 })
	if got := contents(); got != "a/k1=1 b/k2=2" {
		t.Fatalf("at 1: %s", got)
	}
	renameInto(t, f.path, file(map[string]map[string]int{"a": {"k1": 3}}))
	waitFor(t, "the second version", func() bool { return m.Revision() == 2 })
	if got := contents(); got != "a/k1=3" {
		t.Fatalf("at 2: %s", got)
	}
}

type obj struct {
	Name  string
	Value int
}

var nameIndex = statedb.Index[*obj, string]{
	Name:       "name",
	FromObject: func(o *obj) index.KeySet { return index.NewKeySet(index.String(o.Name)) },
	FromKey:    index.String,
	Unique:     true,
}

// Only the latest watch takes a new version: one that is ending (its
// reflector moved on to a new list and watch) never takes a version it can
// no longer send, which would be lost to the new one.
func TestOnlyTheLatestWatchTakesAVersion(t *testing.T) {
	f := newFixture(t, true)
	renameInto(t, f.path, file(map[string]map[string]int{"a": {"k": 1}}))
	_, rev, err := f.src.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	oldCtx, cancelOld := context.WithCancel(t.Context())
	old, _ := f.src.Watch(oldCtx, rev)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	latest, _ := f.src.Watch(ctx, rev)
	renameInto(t, f.path, file(map[string]map[string]int{"a": {"k": 2}}))
	if got := collect(t, latest); len(got) != 2 || got[0].Value != 2 {
		t.Fatalf("the latest watch: %v", got)
	}
	cancelOld()
	for ev := range old {
		t.Fatalf("the older watch sent %v", ev)
	}
}

// TestMemoryAfterShrink: a file of 20,000 objects that shrinks to 10
// leaves the source holding what 10 cost, not its largest version.
func TestMemoryAfterShrink(t *testing.T) {
	version := func(n int) string {
		kv := map[string]int{}
		for i := range n {
			kv[fmt.Sprintf("k%06d", i)] = i
		}
		return file(map[string]map[string]int{"t": kv})
	}
	// List reads the file again now if it has settled: it is dated back.
	list := func(f *fixture, want int) {
		t.Helper()
		old := time.Now().Add(-time.Minute)
		if err := os.Chtimes(f.path, old, old); err != nil {
			t.Fatal(err)
		}
		items, _, err := f.src.List(context.Background())
		if err != nil || len(items) != want {
			t.Fatalf("List: %d items, error %v; want %d", len(items), err, want)
		}
	}
	l0 := liveHeap()
	small := newFixture(t, true)
	renameInto(t, small.path, version(10))
	list(small, 10)
	l1 := liveHeap()
	big := newFixture(t, true)
	renameInto(t, big.path, version(20_000))
	list(big, 20_000)
	renameInto(t, big.path, version(10))
	list(big, 10)
	l2 := liveHeap()
	runtime.KeepAlive(small)
	runtime.KeepAlive(big)
	tenOnly, afterShrink := int64(l1-l0), int64(l2-l1)
	t.Logf("10 objects: %d KB; 10 objects after 20,000: %d KB", tenOnly>>10, afterShrink>>10)
	if afterShrink-tenOnly > 200<<10 {
		t.Fatalf("the source kept %d KB after its file shrank from 20,000 objects to 10", (afterShrink-tenOnly)>>10)
	}
}

// liveHeap is memtest.LiveHeap.
var liveHeap = memtest.LiveHeap
