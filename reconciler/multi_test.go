package reconciler_test

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
	"github.com/steadystate/steadystate/statedb"
)

// multiObj is an object that two reconcilers work on: its statuses are a
// StatusSet with a member per reconciler.
type multiObj struct {
	ID     string
	Value  int
	Status reconciler.StatusSet
}

var multiID = statedb.Index[*multiObj, string]{
	Name:       "id",
	FromObject: func(o *multiObj) index.KeySet { return index.NewKeySet(index.String(o.ID)) },
	FromKey:    index.String,
	Unique:     true,
}

func multiKey(o *multiObj) string { return o.ID }

// multiConfig is the Config of the reconciler called name on table.
func multiConfig(name string, table statedb.RWTable[*multiObj], target reconciler.Target[*multiObj]) reconciler.Config[*multiObj] {
	return reconciler.Config[*multiObj]{
		Name:            name,
		Table:           table,
		Target:          target,
		GetObjectStatus: func(o *multiObj) reconciler.Status { return o.Status.Get(name) },
		SetObjectStatus: func(o *multiObj, s reconciler.Status) *multiObj { o.Status = o.Status.Set(name, s); return o },
		CloneObject:     func(o *multiObj) *multiObj { c := *o; return &c },
		RetryBackoffMin: time.Millisecond,
		RetryBackoffMax: time.Millisecond,
	}
}

// writeVersion writes version v of objects 0..n-1, in transactions of 100,
// every member pending; it returns the table's revision after the last.
func writeVersion(t *testing.T, db *statedb.DB, table statedb.RWTable[*multiObj], n, v int) statedb.Revision {
	t.Helper()
	var rev statedb.Revision
	for i := 0; i < n; i += 100 {
		wtxn := db.WriteTxn(table)
		for j := i; j < min(i+100, n); j++ {
			if _, _, err := table.Insert(wtxn, &multiObj{ID: fmt.Sprintf("o%04d", j), Value: v, Status: reconciler.NewStatusSet()}); err != nil {
				t.Fatal(err)
			}
		}
		rev = table.Revision(wtxn.Commit())
	}
	return rev
}

// Two reconcilers on one table, each writing its member of the objects'
// StatusSet: each applies each desired version exactly once, whatever the
// other's status writes, with one worker or several.
func TestTwoReconcilersOneObject(t *testing.T) {
	for _, workers := range []int{1, 4} {
		t.Run("workers="+strconv.Itoa(workers), func(t *testing.T) {
			const n = 1000
			db := statedb.New()
			table, err := statedb.NewTable(db, "multi", multiID)
			if err != nil {
				t.Fatal(err)
			}
			kernel, bgp := reconcilertest.NewTarget(multiKey), reconcilertest.NewTarget(multiKey)
			cfgK, cfgB := multiConfig("kernel", table, kernel), multiConfig("bgp", table, bgp)
			cfgK.Workers, cfgB.Workers = workers, workers
			recK := reconcilertest.Start(t, db, cfgK)
			recB := reconcilertest.Start(t, db, cfgB)

			for v := 1; v <= 2; v++ {
				rev := writeVersion(t, db, table, n, v)
				for _, r := range []*reconcilertest.Reconciler[*multiObj]{recK, recB} {
					ctx, cancel := context.WithTimeout(t.Context(), reconcilertest.Timeout)
					if _, err := r.WaitUntilReconciled(ctx, rev); err != nil {
						t.Fatal(err)
					}
					cancel()
				}
				// Reached means attempted; the statuses show the outcome.
				for obj := range table.All(db.ReadTxn()) {
					for _, name := range []string{"kernel", "bgp"} {
						if st := obj.Status.Get(name); st.Kind != reconciler.StatusKindDone {
							t.Fatalf("%s: %s is %v after version %d", obj.ID, name, obj.Status, v)
						}
					}
				}
				gotK, gotB := kernel.Count(reconciler.OpUpdate, ""), bgp.Count(reconciler.OpUpdate, "")
				t.Logf("after version %d: kernel %d Updates, bgp %d Updates (want %d each)", v, gotK, gotB, v*n)
				if gotK != v*n || gotB != v*n {
					t.Fatalf("after version %d: kernel made %d Updates, bgp %d; want %d each", v, gotK, gotB, v*n)
				}
			}
		})
	}
}

// slowTarget is a Target whose every Update takes a while.
type slowTarget struct {
	*reconcilertest.Target[*multiObj]
	latency time.Duration
}

func (s slowTarget) Update(ctx context.Context, txn statedb.ReadTxn, obj *multiObj) error {
	time.Sleep(s.latency)
	return s.Target.Update(ctx, txn, obj)
}

// Beside a reconciler that keeps failing and rewriting its Error status, a
// slow one still gets every object Done, with one Update each.
func TestSlowReconcilerBesideFailingOne(t *testing.T) {
	const n = 100
	db := statedb.New()
	table, err := statedb.NewTable(db, "multi", multiID)
	if err != nil {
		t.Fatal(err)
	}
	failing := reconcilertest.NewTarget(multiKey)
	for i := range n {
		failing.Inject(fmt.Sprintf("o%04d", i), reconcilertest.Fault{})
	}
	slow := slowTarget{reconcilertest.NewTarget(multiKey), 2 * time.Millisecond}
	recF := reconcilertest.Start(t, db, multiConfig("failing", table, failing))
	recS := reconcilertest.Start(t, db, multiConfig("slow", table, slow))

	rev := writeVersion(t, db, table, n, 1)
	ctx, cancel := context.WithTimeout(t.Context(), reconcilertest.Timeout)
	defer cancel()
	if _, err := recS.WaitUntilReconciled(ctx, rev); err != nil {
		t.Fatalf("slow reconciler: %v", err)
	}
	for obj := range table.All(db.ReadTxn()) {
		if st := obj.Status.Get("slow"); st.Kind != reconciler.StatusKindDone {
			t.Fatalf("%s: slow member is %v (%v)", obj.ID, st, obj.Status)
		}
	}
	if got := slow.Count(reconciler.OpUpdate, ""); got != n {
		t.Fatalf("slow target: %d Updates, want %d", got, n)
	}
	// The failing one did fail and retry meanwhile.
	if _, err := recF.WaitUntilReconciled(ctx, rev); err == nil {
		t.Fatal("the failing reconciler reports no failure")
	}
	if got := failing.Count(reconciler.OpUpdate, ""); got <= n {
		t.Fatalf("failing target: %d Updates, want retries beyond %d", got, n)
	}
	t.Logf("slow: %d Updates; failing: %d Updates (retries)", slow.Count(reconciler.OpUpdate, ""), failing.Count(reconciler.OpUpdate, ""))
}

// exclusiveTarget checks that no two operations on one key overlap, and
// takes a random moment per operation so that overlaps would show.
type exclusiveTarget struct {
	*reconcilertest.Target[*testObj]
	mu       sync.Mutex
	inFlight map[string]int
	overlaps int
	maxBusy  int
	busy     int
}

func (e *exclusiveTarget) enter(key string) {
	e.mu.Lock()
	e.inFlight[key]++
	if e.inFlight[key] > 1 {
		e.overlaps++
	}
	e.busy++
	e.maxBusy = max(e.maxBusy, e.busy)
	e.mu.Unlock()
	time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
}

func (e *exclusiveTarget) leave(key string) {
	e.mu.Lock()
	e.inFlight[key]--
	e.busy--
	e.mu.Unlock()
}

func (e *exclusiveTarget) Update(ctx context.Context, txn statedb.ReadTxn, o *testObj) error {
	e.enter(o.ID)
	defer e.leave(o.ID)
	return e.Target.Update(ctx, txn, o)
}

func (e *exclusiveTarget) Delete(ctx context.Context, txn statedb.ReadTxn, o *testObj) error {
	e.enter(o.ID)
	defer e.leave(o.ID)
	return e.Target.Delete(ctx, txn, o)
}

func (e *exclusiveTarget) Prune(ctx context.Context, txn statedb.ReadTxn, desired iter.Seq2[*testObj, statedb.Revision]) error {
	return e.Target.Prune(ctx, txn, desired)
}

// The concurrency model test: a writer changes and deletes random keys
// while 8 workers apply them and random operations fail. At the end the
// real system equals the table (the model), every object is Done, no two
// operations on one key ever overlapped, and the gauges are back to 0.
func TestWorkersModel(t *testing.T) {
	const keys, steps = 40, 600
	f := newFixture(t, false)
	target := &exclusiveTarget{Target: f.target, inFlight: map[string]int{}}
	f.cfg.Target = target
	f.cfg.Workers = 8
	f.cfg.RetryBackoffMax = 2 * time.Millisecond
	f.start()

	rng := rand.New(rand.NewPCG(1, 2))
	for step := range steps {
		key := fmt.Sprintf("k%02d", rng.IntN(keys))
		switch rng.IntN(10) {
		case 0, 1:
			if _, found := f.get(key); found {
				f.delete(key)
			}
		case 2:
			f.target.Inject(key, reconcilertest.Fault{Times: 1})
		default:
			f.insert(&testObj{ID: key, Value: step})
		}
		if step%50 == 0 {
			time.Sleep(time.Millisecond) // let rounds of different sizes form
		}
	}
	// Wait until nothing is failing any more (injected faults clear after
	// one hit each, so the retries succeed).
	ctx, cancel := context.WithTimeout(t.Context(), reconcilertest.Timeout)
	defer cancel()
	rev := f.table.Revision(f.db.ReadTxn())
	for {
		_, err := f.rec.WaitUntilReconciled(ctx, rev)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}

	want := map[string]int{}
	for obj := range f.table.All(f.db.ReadTxn()) {
		want[obj.ID] = obj.Value
		if obj.Status.Kind != reconciler.StatusKindDone {
			t.Errorf("%v is %v", obj, obj.Status)
		}
	}
	got := map[string]int{}
	for k, o := range f.target.State() {
		got[k] = o.Value
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("real system %v\nwant (table) %v", got, want)
	}
	target.mu.Lock()
	overlaps, maxBusy := target.overlaps, target.maxBusy
	target.mu.Unlock()
	if overlaps > 0 {
		t.Errorf("%d operations overlapped another on the same key", overlaps)
	}
	if maxBusy < 2 {
		t.Errorf("at most %d operations ran at once with 8 workers", maxBusy)
	}
	if errs, retries := f.metrics.read(); errs != 0 || retries != 0 {
		t.Errorf("gauges errors=%d retries=%d, want 0", errs, retries)
	}
	t.Logf("%d operations, up to %d at once", f.target.NumOps(), maxBusy)
}

// countingStatus counts the calls of GetObjectStatus.
type countingStatus struct{ n atomic.Int64 }

func (c *countingStatus) get(o *testObj) reconciler.Status { c.n.Add(1); return o.Status }

// Refresh by age costs a pass over the table at most every tenth of
// RefreshInterval, not one per change, and never spins while it waits for
// its rate.
func TestRefreshCost(t *testing.T) {
	t.Run("changes", func(t *testing.T) {
		f := newFixture(t, false)
		var calls countingStatus
		f.cfg.GetObjectStatus = calls.get
		f.cfg.RefreshInterval = time.Hour
		f.start()
		f.insertN("o", 1000)
		f.mustReconcile()
		before := calls.n.Load()
		for i := range 100 {
			f.insert(&testObj{ID: fmt.Sprintf("o%04d", i), Value: 2})
			f.mustReconcile()
		}
		// Each change costs a few calls (its round, its status write), not
		// a count of the 1000 objects: at most the one count that starts
		// the first pass (it may fall after the first reconciliation).
		if got := calls.n.Load() - before; got > 1000+100*20 {
			t.Fatalf("100 one-object changes made %d GetObjectStatus calls on a table of 1000", got)
		}
	})
	t.Run("slow rate", func(t *testing.T) {
		f := newFixture(t, false)
		var calls countingStatus
		f.cfg.GetObjectStatus = calls.get
		f.cfg.RefreshInterval = 300 * time.Millisecond
		f.cfg.RefreshRate = 1
		f.start()
		f.insertN("o", 3)
		f.mustReconcile()
		time.Sleep(1500 * time.Millisecond) // a second of refreshing at 1 per second
		if got := calls.n.Load(); got > 500 {
			t.Fatalf("%d GetObjectStatus calls in 1.5 s for 3 objects refreshed once per second: spinning", got)
		}
		// The 3 first Updates and, at 1 per second, at most 3 refreshes in
		// 1.5 s (usually 2; fewer on a loaded machine).
		if n := f.target.Count(reconciler.OpUpdate, ""); n < 3 || n > 6 {
			t.Fatalf("%d Updates: want the 3 first ones and at most 3 refreshes at 1 per second", n)
		}
	})
}

// A DesiredWriter for a table of StatusSets makes every member pending for
// a changed object, under a new ID, and writes nothing for an unchanged
// one, so neither reconciler applies it again.
func TestDesiredWriterWithStatusSet(t *testing.T) {
	db := statedb.New()
	table, err := statedb.NewTable(db, "multi", multiID)
	if err != nil {
		t.Fatal(err)
	}
	kernel, bgp := reconcilertest.NewTarget(multiKey), reconcilertest.NewTarget(multiKey)
	recK := reconcilertest.Start(t, db, multiConfig("kernel", table, kernel))
	recB := reconcilertest.Start(t, db, multiConfig("bgp", table, bgp))
	w := reconciler.DesiredWriter[*multiObj]{
		Table: table,
		Equal: func(a, b *multiObj) bool { return a.ID == b.ID && a.Value == b.Value },
		SetObjectStatus: func(o *multiObj, _ reconciler.Status) *multiObj {
			o.Status = o.Status.Pending()
			return o
		},
	}
	write := func(v int) (statedb.Revision, bool) {
		wtxn := db.WriteTxn(table)
		wrote, err := w.Upsert(wtxn, &multiObj{ID: "a", Value: v})
		if err != nil {
			t.Fatal(err)
		}
		return table.Revision(wtxn.Commit()), wrote
	}
	wait := func(rev statedb.Revision) {
		for _, r := range []*reconcilertest.Reconciler[*multiObj]{recK, recB} {
			if _, err := r.WaitUntilReconciled(t.Context(), rev); err != nil {
				t.Fatal(err)
			}
		}
	}
	rev, _ := write(1)
	wait(rev)
	first, _, _ := table.Get(db.ReadTxn(), multiID.Query("a"))
	if rev, wrote := write(1); wrote {
		t.Fatal("an unchanged object was written again")
	} else {
		wait(rev)
	}
	rev, _ = write(2)
	wait(rev)
	second, _, _ := table.Get(db.ReadTxn(), multiID.Query("a"))
	if second.Status.Get("kernel").ID == first.Status.Get("kernel").ID {
		t.Fatal("the changed object kept its old status ID")
	}
	for _, target := range []*reconcilertest.Target[*multiObj]{kernel, bgp} {
		if n := target.Count(reconciler.OpUpdate, "a"); n != 2 {
			t.Fatalf("%d Updates of a, want 2 (one per version)", n)
		}
	}
	if second.Status.Get("kernel").Kind != reconciler.StatusKindDone || second.Status.Get("bgp").Kind != reconciler.StatusKindDone {
		t.Fatalf("statuses %v", second.Status)
	}
}
