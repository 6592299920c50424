package reflector

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// The model test of putRun: random first lists of up to 5,000 items over
// three tables into empty ones, prepared ahead (pipelineAbove 1) and
// put one after the other (pipelineAbove out of reach), end alike: the
// tables (objects, statuses and revisions), the rejections, the fills'
// maps, Revision, the metrics and the health reports. Keys share primary
// keys (a collision in the middle of a run), values are filtered out,
// rejected by Filter's or Transform's panic or error, or refused by a
// unique index (table tc). A next list then changes the tables through
// the maps the first one made.
func TestPutRunModel(t *testing.T) {
	names := []string{"ta", "tb", "tc"}
	sizes := []int{0, 1, 255, 256, 257, 1023, 1024, 1025, 2047, 2048, 2049, 5000}
	for seed := range uint64(36) {
		rng := rand.New(rand.NewPCG(seed, 99))
		spec := pipeListSpec{
			n:         sizes[int(seed)%len(sizes)],
			weights:   [][]int{{1, 1, 1}, {8, 1, 1}, {1, 0, 0}, {0, 1, 6}}[rng.IntN(4)],
			collide:   []float64{0, 0.0005, 0.01, 0.2}[rng.IntN(4)],
			odd:       []float64{0, 0.01, 0.1}[rng.IntN(3)],
			revisions: rng.IntN(3) == 0,
			sharedKey: rng.IntN(2) == 0,
		}
		if seed >= uint64(len(sizes)) {
			spec.n = rng.IntN(5001)
		}
		t.Run(fmt.Sprintf("seed=%d/n=%d", seed, spec.n), func(t *testing.T) {
			items := pipeItems(rng, names, spec, 100)
			ahead, plain := newPipeRig(t, names, "tc"), newPipeRig(t, names, "tc")
			ahead.src.set(100, items)
			plain.src.set(100, items)
			ahead.relist(t, 1, "initial")
			plain.relist(t, 1<<30, "initial")
			compareRigs(t, "first list", ahead, plain, names, true, true)

			// After deletes, which of two tags the unique index refuses,
			// and which key's of two Equal objects stays, depend on the
			// order of the deletes (a map's) on either path: tc is
			// compared after the first list only, and the keys that made
			// the objects too.
			next := nextList(rng, items, names, 101)
			ahead.src.set(101, next)
			plain.src.set(101, next)
			ahead.relist(t, 1, "resync")
			plain.relist(t, 1<<30, "resync")
			compareRigs(t, "next list", ahead, plain, names[:2], false, true)
		})
	}
}

// Collisions at chosen places of a long run: the first of them switches
// putNew off mid-run, and the Puts after it take the usual way with the
// values prepared ahead. Each ends as one put after the other, with the
// counts putRun returns.
func TestPutRunCollisionMidRun(t *testing.T) {
	const n = 3000
	for _, at := range []int{1, 255, 256, 257, 1023, 1024, 1025, 2048, n - 1} {
		t.Run(fmt.Sprint("at=", at), func(t *testing.T) {
			var items []Item[int]
			for i := range n {
				v := 100*i + 10
				switch {
				case i == at:
					v = 100*(at/2) + 11 // the primary key of an earlier item
				case i == at-1 && at > 1:
					v = 100*(at/3) + 10 // an equal object of an earlier item
				case i > at && i%50 == 0:
					v += codeFiltered // filtered out after the switch: a delete of a key not held
				case i > at && i%70 == 0:
					v += codeTransformError
				}
				items = append(items, Item[int]{Table: "ta", Key: fmt.Sprintf("k%05d", i), Value: v, Revision: 7})
			}
			ahead, plain := newPipeRig(t, []string{"ta"}), newPipeRig(t, []string{"ta"})
			ahead.src.set(7, items)
			plain.src.set(7, items)
			ahead.relist(t, 1, "initial")
			plain.relist(t, 1<<30, "initial")
			compareRigs(t, "list", ahead, plain, []string{"ta"}, true, true)

			// The counts: putRun's, prepared ahead, against put's.
			gw, gr := fillCounts(t, items, 1)
			ww, wr := fillCounts(t, items, 1<<30)
			if gw != ww || gr != wr {
				t.Fatalf("putRun wrote %d and rejected %d, want %d and %d", gw, gr, ww, wr)
			}
		})
	}
}

// fillCounts runs a first list of items (all of table ta) through a new
// fill's putRun, preparing ahead from above Puts, and returns its counts.
func fillCounts(t *testing.T, items []Item[int], above int) (written, rejected int) {
	defer setPipelineAbove(above)()
	r := newPipeRig(t, []string{"ta"})
	f := r.fill("ta")
	var evs []Event[int]
	for _, it := range items {
		evs = append(evs, Event[int]{Kind: Put, Table: "ta", Key: it.Key, Value: it.Value})
	}
	f.begin(len(evs), true)
	wtxn := r.db.WriteTxn(r.tables["ta"])
	written, rejected = f.putRun(wtxn, evs)
	wtxn.Commit()
	f.keep()
	f.settle()
	return written, rejected
}

// Filter and Transform are called exactly once for each Put of a first
// list, Filter first, in the list's order, never two at once; prepared
// ahead, each table's on one goroutine that is not the commit's, and at
// most pipelineSlots chunks ahead of the writes; else (a short run, or
// GOMAXPROCS 1) on the commit's.
func TestPutRunCallsInOrder(t *testing.T) {
	names := []string{"ta", "tb"}
	var items []Item[int]
	var want []pipeCall
	for i := range 3000 {
		v := 100*i + 10 + i%60
		if i%9 == 0 {
			v = 100*i + codeFiltered
		}
		items = append(items, Item[int]{Table: "ta", Key: fmt.Sprintf("a%05d", i), Value: v, Revision: 5})
		want = append(want, pipeCall{what: 'F', table: "ta", key: items[i].Key})
		if i%9 != 0 {
			want = append(want, pipeCall{what: 'T', table: "ta", key: items[i].Key})
		}
	}
	for i := range 2100 {
		items = append(items, Item[int]{Table: "tb", Key: fmt.Sprintf("b%05d", i), Value: 100*i + 10, Revision: 5})
		want = append(want, pipeCall{what: 'F', table: "tb", key: fmt.Sprintf("b%05d", i)},
			pipeCall{what: 'T', table: "tb", key: fmt.Sprintf("b%05d", i)})
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
	for _, c := range []struct{ above, procs int }{{1, 0}, {2048, 0}, {1 << 30, 0}, {1, 1}} {
		t.Run(fmt.Sprintf("above=%d/procs=%d", c.above, c.procs), func(t *testing.T) {
			r := newPipeRig(t, names)
			r.hooks.record = true
			r.src.set(5, items)
			if c.procs > 0 {
				// Not through relist, which makes two of one.
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(c.procs))
				defer func(old int) { pipelineAbove = old }(pipelineAbove)
				pipelineAbove = c.above
				if err := r.m.relist(context.Background(), "initial"); err != nil {
					t.Fatal(err)
				}
			} else {
				r.relist(t, c.above, "initial")
			}
			calls := r.hooks.recorded()
			if r.hooks.overlap.Load() {
				t.Fatal("two calls of Filter or Transform overlapped")
			}
			strip := func(c pipeCall) pipeCall { return pipeCall{what: c.what, table: c.table, key: c.key} }
			for i := range min(len(calls), len(want)) {
				if strip(calls[i]) != want[i] {
					t.Fatalf("call %d: %c %s/%s, want %c %s/%s", i, calls[i].what, calls[i].table, calls[i].key, want[i].what, want[i].table, want[i].key)
				}
			}
			if len(calls) != len(want) {
				t.Fatalf("%d calls, want %d", len(calls), len(want))
			}
			me := goid()
			// Both tables have at least 2048 Puts; one core prepares none
			// ahead.
			ahead := c.above <= 2048 && c.procs != 1
			goroutines := map[string]string{}
			for _, call := range calls {
				if onMine := call.g == me; onMine == ahead {
					t.Fatalf("%c %s/%s ran on the commit's goroutine: %v, want %v", call.what, call.table, call.key, onMine, !ahead)
				}
				if g, ok := goroutines[call.table]; ok && g != call.g {
					t.Fatalf("table %s prepared on goroutines %s and %s", call.table, g, call.g)
				}
				goroutines[call.table] = call.g
			}
			// tb filters nothing out: the objects written so far, less
			// ta's, are its Puts done. Its k-th Transform comes once the
			// chunk pipelineSlots before k's is written.
			written := int64(0) // ta's
			for _, call := range want {
				if call.table == "ta" && call.what == 'T' {
					written++
				}
			}
			k := int64(0)
			for _, call := range calls {
				if call.table != "tb" || call.what != 'T' {
					continue
				}
				done := call.written - written
				if least := (k/pipelineChunk - (pipelineSlots - 1)) * pipelineChunk; done < least {
					t.Fatalf("tb's Transform %d came with %d of its Puts written, want at least %d", k, done, least)
				}
				if !ahead && done != k {
					t.Fatalf("tb's Transform %d came with %d of its Puts written, want %d (one after the other)", k, done, k)
				}
				k++
			}
		})
	}
}

// A panic of the primary index's FromObject on a first list's Put,
// prepared ahead, is raised by the commit's goroutine when that Put comes:
// Run propagates it, the commit is rolled back (the tables empty, the
// fills' memory empty, Revision 0), no goroutine stays, Transform was
// called for the Puts up to it only (as one put after the other would),
// and a Run without the panic then converges to what one put after the
// other makes.
func TestPutRunPanicInPrimaryKey(t *testing.T) {
	defer setPipelineAbove(1)()
	names := []string{"ta", "tb"}
	for _, c := range []struct{ n, at int }{
		{1500, 0}, {1500, 255}, {1500, 256}, {1500, 1023}, {1500, 1024}, {1500, 1499},
		{1280, 1279}, {1, 0}, {256, 255},
	} {
		t.Run(fmt.Sprintf("n=%d/at=%d", c.n, c.at), func(t *testing.T) {
			items := panicItems(c.n, c.at)
			r := newPipeRig(t, names)
			r.src.set(9, items)
			r.hooks.pkPanic.Store(666)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			transformed := panickedRun(ctx, t, r, names, "primary FromObject of b")
			if transformed != c.at+1 {
				t.Fatalf("tb's Transform was called %d times, want %d (up to the panic)", transformed, c.at+1)
			}

			r.hooks.pkPanic.Store(-1)
			convergesAgain(t, ctx, cancel, r, names, items)
		})
	}
}

// A Transform that calls runtime.Goexit (t.Fatal in a test's) on a Put
// prepared ahead ends the commit's goroutine when that Put comes, as one
// put after the other would: Run ends rather than hang with its write
// transaction open, the commit is rolled back, and no goroutine stays.
func TestPutRunGoexitInTransform(t *testing.T) {
	names := []string{"ta", "tb"}
	for _, above := range []int{1, 1 << 30} {
		for _, at := range []int{0, 255, 256, 1499} {
			t.Run(fmt.Sprintf("above=%d/at=%d", above, at), func(t *testing.T) {
				defer setPipelineAbove(above)()
				r := newPipeRig(t, names)
				r.src.set(9, panicItems(1500, at))
				r.hooks.goexit.Store(666)
				baseline := goleak.IgnoreCurrent()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if p := endOf(t, runRig(ctx, r)); p != nil {
					t.Fatalf("Run ended with %v, want its goroutine ended by Goexit", p)
				}
				checkRolledBack(t, r, names)
				if err := goleak.Find(baseline); err != nil {
					t.Fatalf("a goroutine outlived the commit: %v", err)
				}
			})
		}
	}
}

// panickedRun runs r until its Run panics with a value that says want,
// checks that the commit was rolled back and that no goroutine outlived
// it, and returns how many of table tb's values Transform saw.
func panickedRun(ctx context.Context, t *testing.T, r *pipeRig, names []string, want string) (transformed int) {
	t.Helper()
	r.hooks.record = true
	baseline := goleak.IgnoreCurrent()
	p := endOf(t, runRig(ctx, r))
	if p == nil || !strings.Contains(fmt.Sprint(p), want) {
		t.Fatalf("Run ended with %v, want a panic of %q", p, want)
	}
	checkRolledBack(t, r, names)
	if err := goleak.Find(baseline); err != nil {
		t.Fatalf("a goroutine outlived the panicked commit: %v", err)
	}
	for _, call := range r.hooks.recorded() {
		if call.table == "tb" && call.what == 'T' {
			transformed++
		}
	}
	return transformed
}

// panicItems is a list of table ta's 2100 values and tb's n, whose
// value at is 666 (the others never are).
func panicItems(n, at int) []Item[int] {
	var items []Item[int]
	for i := range 2100 {
		items = append(items, Item[int]{Table: "ta", Key: fmt.Sprintf("a%05d", i), Value: 100*i + 10, Revision: 9})
	}
	for i := range n {
		v := 100*i + 10
		if i == at {
			v = 666
		}
		items = append(items, Item[int]{Table: "tb", Key: fmt.Sprintf("b%05d", i), Value: v, Revision: 9})
	}
	return items
}

// A panic on the commit's goroutine (SetObjectStatus, in the write) while
// the Puts after it are prepared ahead: the goroutine that prepares them
// stops and is waited for, the commit is rolled back, Transform ran at
// most pipelineSlots chunks past the panic, and a later Run converges.
func TestPutRunPanicInWrite(t *testing.T) {
	defer setPipelineAbove(1)()
	names := []string{"ta", "tb"}
	for _, c := range []struct{ n, at int }{{1500, 0}, {1500, 300}, {1500, 1100}, {1500, 1499}, {4096, 1}} {
		t.Run(fmt.Sprintf("n=%d/at=%d", c.n, c.at), func(t *testing.T) {
			items := panicItems(c.n, c.at)
			r := newPipeRig(t, names)
			r.src.set(9, items)
			r.hooks.statusPanic.Store(666)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			transformed := panickedRun(ctx, t, r, names, "SetObjectStatus of b")
			most := min(c.n, (c.at/pipelineChunk+pipelineSlots)*pipelineChunk)
			if transformed < c.at+1 || transformed > most {
				t.Fatalf("tb's Transform was called %d times, want %d to %d", transformed, c.at+1, most)
			}

			r.hooks.statusPanic.Store(-1)
			convergesAgain(t, ctx, cancel, r, names, items)
		})
	}
}

// convergesAgain runs r's Multi again (its panic hook cleared) until it
// reaches revision 9, then cancels ctx: it must end without a panic, its
// tables as a plain first list of items makes them.
func convergesAgain(t *testing.T, ctx context.Context, cancel context.CancelFunc, r *pipeRig, names []string, items []Item[int]) {
	t.Helper()
	plain := newPipeRig(t, names)
	plain.src.set(9, items)
	plain.relist(t, 1<<30, "initial")
	second := runRig(ctx, r)
	waitRevision(t, r.m, 9)
	cancel()
	if p := endOf(t, second); p != nil {
		t.Fatalf("the Run after the panic panicked: %v", p)
	}
	compareRigs(t, "the Run after the panic", r, plain, names, false, false)
}

// runRig runs r's Multi until ctx ends; the channel gets what it
// panicked with (nil if it returned).
func runRig(ctx context.Context, r *pipeRig) <-chan any {
	ended := make(chan any, 1)
	go func() {
		defer func() { ended <- recover() }()
		r.m.Run(ctx)
	}()
	return ended
}

// endOf waits (10s at most: a commit stuck on its preparing goroutine
// fails here) for what a Run of runRig ended with.
func endOf(t *testing.T, ended <-chan any) any {
	t.Helper()
	select {
	case p := <-ended:
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end")
		return nil
	}
}

// checkRolledBack fails unless r's tables and fills are as before any
// list.
func checkRolledBack(t *testing.T, r *pipeRig, names []string) {
	t.Helper()
	for _, name := range names {
		if got := r.contents(name, false); len(got) != 0 {
			t.Fatalf("table %s holds %d objects after the panic, want none", name, len(got))
		}
		f := r.fill(name)
		if f.build != nil || len(f.staged) != 0 || f.fast || f.checkFast {
			t.Fatalf("table %s: after the panic build %v, staged %d, fast %v, checkFast %v", name, f.build != nil, len(f.staged), f.fast, f.checkFast)
		}
		held, owners, rejected := r.memory(name)
		if len(held) != 0 || len(owners) != 0 || len(rejected) != 0 || f.objects() != 0 {
			t.Fatalf("table %s: after the panic held %d, owners %d, rejected %d, objects %d; want none", name, len(held), len(owners), len(rejected), f.objects())
		}
		if ok, _ := r.tables[name].Initialized(r.db.ReadTxn()); ok {
			t.Fatalf("table %s is initialized after the panic", name)
		}
	}
	if rev := r.m.Revision(); rev != 0 || len(r.m.Rejected()) != 0 || r.m.listed() {
		t.Fatalf("after the panic Revision %d, rejected %v, listed %v; want 0, none, false", rev, r.m.Rejected(), r.m.listed())
	}
}

// waitRevision waits (10s at most) for m's Revision to reach rev.
func waitRevision(t *testing.T, m *Multi[int], rev uint64) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		now, moved := m.RevisionWatch()
		if now >= rev {
			return
		}
		select {
		case <-moved:
		case <-deadline:
			t.Fatalf("Revision %d, want %d", now, rev)
		}
	}
}

// The prepared values of a run are the ones written: a Transform whose
// object depends on the call (a counter) must make, for each key, the
// object of its one call, on either path.
func TestPutRunWritesThePreparedObject(t *testing.T) {
	for _, above := range []int{1, 1 << 30} {
		db := statedb.New()
		table, err := statedb.NewTable(db, "kvs", kvIndex)
		if err != nil {
			t.Fatal(err)
		}
		calls := 0
		filler, err := Into[int, *kv]{Table: "kvs", Transform: func(key string, v int) (*kv, error) {
			calls++ // one goroutine at a time (TestPutRunCallsInOrder)
			return &kv{K: key, V: calls}, nil
		}, Writer: reconciler.DesiredWriter[*kv]{
			Table: table,
			Equal: func(a, b *kv) bool { return *a == *b },
			SetObjectStatus: func(o *kv, s reconciler.Status) *kv {
				o.Status = s
				return o
			},
		}}.newFill(slog.New(slog.DiscardHandler), nil)
		if err != nil {
			t.Fatal(err)
		}
		f := filler.(*fill[int, *kv])
		var evs []Event[int]
		for i := range 3000 {
			evs = append(evs, Event[int]{Kind: Put, Key: fmt.Sprintf("k%05d", i), Value: i})
		}
		restore := setPipelineAbove(above)
		f.begin(len(evs), true)
		wtxn := db.WriteTxn(table)
		written, rejected := f.putRun(wtxn, evs)
		wtxn.Commit()
		f.keep()
		f.settle()
		restore()
		if written != len(evs) || rejected != 0 || calls != len(evs) {
			t.Fatalf("above %d: wrote %d, rejected %d, %d calls; want %d, 0, %d", above, written, rejected, calls, len(evs), len(evs))
		}
		for i, ev := range evs {
			o, _, found := table.Get(db.ReadTxn(), kvIndex.Query(ev.Key))
			if !found || o.V != i+1 || o.Status.Kind != reconciler.StatusKindPending {
				t.Fatalf("above %d: key %s holds %+v (found %v), want the value of call %d, Pending", above, ev.Key, o, found, i+1)
			}
		}
	}
}
