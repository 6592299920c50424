package reconciler

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/internal/memtest"
	"github.com/steadystate/steadystate/statedb"
)

// TestMemoryUnderChurn runs a reconciler whose status writes interleave with
// the commits of a writer of its table and of a writer of another table,
// for tens of thousands of commits over a fixed set of keys: the live heap
// after GC must not grow with the number of commits (statedb's "Memory
// depends on live data", in the shape a real program has).
func TestMemoryUnderChurn(t *testing.T) {
	commits := 20_000
	if testing.Short() {
		commits /= 4
	}
	db := statedb.New()
	tbl, err := statedb.NewTable(db, "objs", benchID)
	if err != nil {
		t.Fatal(err)
	}
	other, err := statedb.NewTable(db, "other", benchID)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := New(db, Config[*benchObj]{
		Name:            "churn",
		Table:           tbl,
		Target:          nopTarget{},
		GetObjectStatus: func(o *benchObj) Status { return o.Status },
		SetObjectStatus: func(o *benchObj, s Status) *benchObj { o.Status = s; return o },
		CloneObject:     func(o *benchObj) *benchObj { c := *o; return &c },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rec.Run(ctx) }()
	defer func() { cancel(); <-done }()

	write := func(i int) {
		wtxn := db.WriteTxn(tbl)
		for k := range 10 {
			tbl.Insert(wtxn, &benchObj{ID: uint64((i*10 + k) % 1000), Status: StatusPending()})
		}
		rev := tbl.Revision(wtxn)
		wtxn.Commit()
		wtxn = db.WriteTxn(other)
		for k := range 10 {
			other.Insert(wtxn, &benchObj{ID: uint64((i*10 + k) % 1000)})
		}
		wtxn.Commit()
		// Wait now and then, so that status writes really interleave and
		// the reconciler does not just batch everything at the end.
		if i%20 == 0 {
			wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
			if _, err := rec.WaitUntilReconciled(wctx, rev); err != nil {
				t.Fatalf("WaitUntilReconciled: %v", err)
			}
			wcancel()
		}
	}
	warm := commits / 10
	var base uint64
	for i := range commits {
		if i == warm {
			base = liveHeap()
		}
		write(i)
	}
	end := liveHeap()
	runtime.KeepAlive(tbl)
	grown := int64(end) - int64(base)
	t.Logf("%d commits: live heap %d KB after warm-up, %d KB at the end", 2*commits, base>>10, end>>10)
	if grown > 1<<20 {
		t.Fatalf("live heap grew by %d KB over %d commits of constant live data (%d bytes/commit)",
			grown>>10, 2*(commits-warm), grown/int64(2*(commits-warm)))
	}
}

// liveHeap is memtest.LiveHeap.
var liveHeap = memtest.LiveHeap

// TestMemoryAfterBurst: a burst of objects reconciled, then deleted,
// leaves the live heap where it was before the burst: the reconciler keeps
// no buffer sized by the largest round it ever ran, and the round buffer
// it keeps holds none of the burst's objects (memory follows live data,
// not history). One burst is a single round of 50,000 objects, the other
// rounds of 500 objects of 16 KB each.
func TestMemoryAfterBurst(t *testing.T) {
	for _, c := range []struct{ n, round, payload int }{{50_000, 50_000, 0}, {1_500, 500, 16 << 10}} {
		t.Run(fmt.Sprintf("objects=%d/round=%d", c.n, c.round), func(t *testing.T) { memoryAfterBurst(t, c.n, c.round, c.payload) })
	}
}

// heavyObj is an object with a payload.
type heavyObj struct {
	ID      uint64
	Status  Status
	Payload []byte
}

type heavyTarget struct{}

func (heavyTarget) Update(context.Context, statedb.ReadTxn, *heavyObj) error { return nil }
func (heavyTarget) Delete(context.Context, statedb.ReadTxn, *heavyObj) error { return nil }
func (heavyTarget) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*heavyObj, statedb.Revision]) error {
	return nil
}

var heavyID = statedb.Index[*heavyObj, uint64]{
	Name:       "id",
	FromObject: func(o *heavyObj) index.KeySet { return index.NewKeySet(index.Uint64(o.ID)) },
	FromKey:    index.Uint64,
	Unique:     true,
}

// heavyConfig is the config of a reconciler of a table of heavyObj.
func heavyConfig(t *testing.T, db *statedb.DB, target Target[*heavyObj]) (statedb.RWTable[*heavyObj], Config[*heavyObj]) {
	t.Helper()
	tbl, err := statedb.NewTable(db, "objs", heavyID)
	if err != nil {
		t.Fatal(err)
	}
	return tbl, Config[*heavyObj]{
		Name:            "heavy",
		Table:           tbl,
		Target:          target,
		GetObjectStatus: func(o *heavyObj) Status { return o.Status },
		SetObjectStatus: func(o *heavyObj, s Status) *heavyObj { o.Status = s; return o },
		CloneObject:     func(o *heavyObj) *heavyObj { c := *o; return &c },
	}
}

// runReconciler runs a reconciler of cfg until the test ends; wait is its
// WaitUntilReconciled, a minute at most.
func runReconciler[Obj any](t *testing.T, db *statedb.DB, cfg Config[Obj]) (r Reconciler[Obj], wait func(statedb.Revision) error) {
	t.Helper()
	r, err := New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r, func(rev statedb.Revision) error {
		wctx, wcancel := context.WithTimeout(ctx, time.Minute)
		defer wcancel()
		_, err := r.WaitUntilReconciled(wctx, rev)
		return err
	}
}

func memoryAfterBurst(t *testing.T, n, round, payload int) {
	db := statedb.New()
	tbl, cfg := heavyConfig(t, db, heavyTarget{})
	cfg.IncrementalRoundSize = round
	_, waitErr := runReconciler(t, db, cfg)
	wait := func(rev statedb.Revision) {
		t.Helper()
		if err := waitErr(rev); err != nil {
			t.Fatalf("WaitUntilReconciled: %v", err)
		}
	}
	// One object first, so that the table and the reconciler's own
	// bookkeeping exist before the base is taken.
	wtxn := db.WriteTxn(tbl)
	tbl.Insert(wtxn, &heavyObj{ID: uint64(n), Status: StatusPending()})
	wait(tbl.Revision(wtxn.Commit()))
	base := liveHeap()

	wtxn = db.WriteTxn(tbl)
	for i := range n {
		tbl.Insert(wtxn, &heavyObj{ID: uint64(i), Status: StatusPending(), Payload: make([]byte, payload)})
	}
	wait(tbl.Revision(wtxn.Commit()))
	wtxn = db.WriteTxn(tbl)
	for i := range n {
		tbl.Delete(wtxn, &heavyObj{ID: uint64(i)})
	}
	wait(tbl.Revision(wtxn.Commit()))
	// One more change, reconciled: the change iterators move past the
	// deletes, which leave the table's graveyard (statedb's doc).
	wtxn = db.WriteTxn(tbl)
	tbl.Insert(wtxn, &heavyObj{ID: uint64(n), Status: StatusPending()})
	wait(tbl.Revision(wtxn.Commit()))
	end := liveHeap()
	runtime.KeepAlive(tbl)
	t.Logf("live heap %d KB before a burst of %d objects, %d KB after it was deleted", base>>10, n, end>>10)
	if grown := int64(end) - int64(base); grown > 1<<20 {
		t.Fatalf("the live heap kept %d KB after a burst of %d objects came and went", grown>>10, n)
	}
}

// TestRoundBufferSize: a pass's round buffer is made once, at the size of
// its burst (the revisions since the last pass), and not at all for a pass
// whose changes are only statuses (nothing Pending): a writer that renews
// 5,000 Done statuses does not make the reconciler allocate a round.
func TestRoundBufferSize(t *testing.T) {
	db := statedb.New()
	tbl, err := statedb.NewTable(db, "objs", benchID)
	if err != nil {
		t.Fatal(err)
	}
	rec, waitErr := runReconciler(t, db, Config[*benchObj]{
		Name:                 "rounds",
		Table:                tbl,
		Target:               nopTarget{},
		GetObjectStatus:      func(o *benchObj) Status { return o.Status },
		SetObjectStatus:      func(o *benchObj, s Status) *benchObj { o.Status = s; return o },
		CloneObject:          func(o *benchObj) *benchObj { c := *o; return &c },
		IncrementalRoundSize: 50_000,
	})
	r := rec.(*reconciler[*benchObj])
	wait := func(rev statedb.Revision) {
		t.Helper()
		if err := waitErr(rev); err != nil {
			t.Fatalf("WaitUntilReconciled: %v", err)
		}
	}
	const n = 20_000
	wtxn := db.WriteTxn(tbl)
	for i := range n {
		tbl.Insert(wtxn, &benchObj{ID: uint64(i), Status: StatusPending()})
	}
	wait(tbl.Revision(wtxn.Commit()))
	if made := r.roundsMade.Load(); made != 1 {
		t.Fatalf("a burst of %d objects made %d round buffers at the pass's size, want 1", n, made)
	}
	// Statuses renewed by another writer: changes, but none Pending.
	for range 3 {
		wtxn = db.WriteTxn(tbl)
		for i := range 5_000 {
			tbl.Insert(wtxn, &benchObj{ID: uint64(i), Status: StatusDone()})
		}
		wait(tbl.Revision(wtxn.Commit()))
	}
	if made := r.roundsMade.Load(); made != 1 {
		t.Fatalf("passes of status changes only made %d more round buffers, want none", made-1)
	}
}

// failTarget fails every update while fail is set, terminally if
// terminal is.
type failTarget struct {
	heavyTarget
	fail, terminal atomic.Bool
}

func (f *failTarget) Update(context.Context, statedb.ReadTxn, *heavyObj) error {
	switch {
	case !f.fail.Load():
		return nil
	case f.terminal.Load():
		return Terminal(errors.New("refused"))
	}
	return errors.New("not now")
}

// TestMemoryAfterFailures: 20,000 objects that failed and were then
// applied (written again after a terminal failure, retried after another)
// leave the live heap where it was before: the reconciler's bookkeeping
// of failures and retries is not kept at the size of the burst.
func TestMemoryAfterFailures(t *testing.T) {
	for _, terminal := range []bool{true, false} {
		t.Run(fmt.Sprintf("terminal=%v", terminal), func(t *testing.T) { memoryAfterFailures(t, terminal) })
	}
}

func memoryAfterFailures(t *testing.T, terminal bool) {
	const n = 20_000
	db := statedb.New()
	target := &failTarget{}
	target.terminal.Store(terminal)
	tbl, cfg := heavyConfig(t, db, target)
	cfg.RetryBackoffMin, cfg.RetryBackoffMax = time.Millisecond, time.Millisecond
	_, wait := runReconciler(t, db, cfg)
	write := func(from, to int) statedb.Revision {
		wtxn := db.WriteTxn(tbl)
		for i := from; i < to; i++ {
			tbl.Insert(wtxn, &heavyObj{ID: uint64(i), Status: StatusPending()})
		}
		return tbl.Revision(wtxn.Commit())
	}
	if err := wait(write(n, n+1)); err != nil {
		t.Fatal(err)
	}
	base := liveHeap()

	target.fail.Store(true)
	var nr *NotReconciledError
	if err := wait(write(0, n)); !errors.As(err, &nr) || nr.Failing != n {
		t.Fatalf("after a write of %d objects the target refused: %v; want %d failing", n, err, n)
	}
	target.fail.Store(false)
	if terminal {
		// A terminal failure waits for the object to change.
		if err := wait(write(0, n)); err != nil {
			t.Fatal(err)
		}
	} else {
		// The retries succeed: wait until every object is Done.
		for {
			txn := db.ReadTxn()
			objs, changed := tbl.AllWatch(txn)
			doneN := 0
			for o := range objs {
				if o.Status.Kind == StatusKindDone {
					doneN++
				}
			}
			if doneN == n+1 {
				break
			}
			select {
			case <-changed:
			case <-time.After(time.Minute):
				t.Fatalf("%d of %d objects Done a minute after the target took them again", doneN, n+1)
			}
		}
	}
	wtxn := db.WriteTxn(tbl)
	for i := range n {
		tbl.Delete(wtxn, &heavyObj{ID: uint64(i)})
	}
	if err := wait(tbl.Revision(wtxn.Commit())); err != nil {
		t.Fatal(err)
	}
	// One more change: the change iterators move past the deletes.
	if err := wait(write(n, n+1)); err != nil {
		t.Fatal(err)
	}
	end := liveHeap()
	runtime.KeepAlive(tbl)
	t.Logf("live heap %d KB before %d objects failed and were applied, %d KB after they were deleted", base>>10, n, end>>10)
	if grown := int64(end) - int64(base); grown > 1<<20 {
		t.Fatalf("the live heap kept %d KB after %d failures came and went", grown>>10, n)
	}
}
