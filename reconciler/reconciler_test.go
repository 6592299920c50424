package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
)

// Scenarios that need precise interleaving or many objects, and so are
// written in Go rather than as testdata scripts. Those that check that
// something did not happen run in a testing/synctest bubble: after
// synctest.Wait every goroutine of the test is blocked, so nothing can
// happen until the test acts or lets fake time pass, and time.Sleep fires
// every timer due meanwhile. Such a check cannot pass because the unwanted
// event merely came late.

// ops returns the target's operations as scripts write them.
func ops(f *fixture) []string {
	var out []string
	for _, op := range f.target.Ops() {
		out = append(out, opString(op))
	}
	return out
}

// An object changed while its Update is in flight: the Done of the old
// version is not written over the new version, and the new version is
// reconciled in turn.
func TestUpdateInFlight(t *testing.T) {
	f := newFixture(t, false)
	release1 := f.target.Inject("a", reconcilertest.Fault{Block: true, Times: 1})
	f.start()

	f.insert(&testObj{ID: "a", Value: 1})
	f.target.WaitForBlocked(t, 1)

	// The writer commits a new version while a=1 is being applied; block
	// the Update of the new version too, to look at the table meanwhile.
	f.insert(&testObj{ID: "a", Value: 2})
	release2 := f.target.Inject("a", reconcilertest.Fault{Block: true, Times: 1})
	release1()
	f.target.WaitUntil(t, "the Update of a=2 blocked", func() bool {
		return f.target.Blocked() == 1 && slices.Equal(ops(f), []string{"update(a=1)", "update(a=2)"})
	})
	if obj, _ := f.get("a"); obj.Value != 2 || obj.Status.Kind != reconciler.StatusKindPending {
		t.Fatalf("while a=2 is in flight the table holds %v %s, want a=2 still Pending (the stale Done of a=1 must not be written)", obj, obj.Status)
	}

	release2()
	if obj := f.waitStatus("a", reconciler.StatusKindDone, ""); obj.Value != 2 {
		t.Fatalf("final object %v, want a=2 Done", obj)
	}
	f.mustReconcile()
	if got := ops(f); !slices.Equal(got, []string{"update(a=1)", "update(a=2)"}) {
		t.Fatalf("target operations %v", got)
	}
	if got := f.target.State()["a"].Value; got != 2 {
		t.Fatalf("real a=%d, want 2", got)
	}
}

// An object deleted while its Update is in flight: the Done of the update
// is not written (the object is gone) and the delete is applied after it.
func TestDeleteWhileInFlight(t *testing.T) {
	f := newFixture(t, false)
	release := f.target.Inject("a", reconcilertest.Fault{Block: true, Times: 1})
	f.start()
	f.insert(&testObj{ID: "a", Value: 1})
	f.target.WaitForBlocked(t, 1)
	f.delete("a")
	release()
	f.mustReconcile()
	if got := ops(f); !slices.Equal(got, []string{"update(a=1)", "delete(a)"}) {
		t.Fatalf("target operations %v, want the update, then the delete", got)
	}
	if _, found := f.get("a"); found {
		t.Fatal("a is back in the table: the status of the in-flight Update was written over the delete")
	}
	if real := f.target.State(); len(real) != 0 {
		t.Fatalf("real system %v, want empty", real)
	}
}

// One object failing forever does not hold back 1000 others, in rounds of
// 100: they are all Done before any time passes, so none of them waited
// for the failing object's backoff; the failing object is retried once its
// backoff has passed.
func TestOneFailingDoesNotDelayOthers(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		f := newFixture(t, false)
		f.cfg.IncrementalRoundSize = 100
		f.cfg.RetryBackoffMin, f.cfg.RetryBackoffMax = time.Second, time.Second
		f.target.Inject("bad", reconcilertest.Fault{})
		f.start()
		objs := []*testObj{{ID: "bad", Value: 1}} // first in the first round
		for i := range 1000 {
			objs = append(objs, &testObj{ID: fmt.Sprintf("ok%04d", i), Value: i})
		}
		start := time.Now()
		f.insert(objs...)
		if err := f.rec.Reconciled(); !errors.Is(err, reconciler.ErrNotAllReconciled) {
			t.Fatalf("Reconciled: %v, want ErrNotAllReconciled", err)
		}
		if elapsed := time.Since(start); elapsed != 0 {
			t.Fatalf("the others took %v of fake time: something waited for a timer", elapsed)
		}
		if done := f.countStatus(reconciler.StatusKindDone); done != 1000 {
			t.Fatalf("%d objects Done, want 1000", done)
		}
		if n := f.target.Count(reconciler.OpUpdate, "bad"); n != 1 {
			t.Fatalf("bad was attempted %d times before its backoff, want 1", n)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if n := f.target.Count(reconciler.OpUpdate, "bad"); n != 2 {
			t.Fatalf("bad was attempted %d times after its backoff, want 2", n)
		}
	})
}

// After convergence the reconciler is quiet: its own status writes cause
// no further Update, nothing is written to the table, and an object that
// failed terminally is not retried, however long we wait.
func TestNoUpdatesWhenIdle(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		f := newFixture(t, false)
		f.target.Inject("term", reconcilertest.Fault{Terminal: true}) // an Error that is never retried
		f.start()
		f.insertN("o", 100)
		f.insert(&testObj{ID: "term", Value: 1})
		if err := f.rec.Reconciled(); !errors.Is(err, reconciler.ErrNotAllReconciled) {
			t.Fatalf("Reconciled: %v", err)
		}
		synctest.Wait()
		if got := f.target.NumOps(); got != 101 {
			t.Fatalf("%d target operations to converge, want 101", got)
		}
		if obj, _ := f.get("term"); obj.Status.Kind != reconciler.StatusKindError {
			t.Fatalf("term is %s, want Error", obj.Status)
		}
		rev := f.table.Revision(f.db.ReadTxn())

		time.Sleep(time.Hour) // every timer due within the hour fires
		synctest.Wait()
		if got := ops(f)[101:]; len(got) > 0 {
			t.Fatalf("target operations while idle: %v", got)
		}
		if got := f.table.Revision(f.db.ReadTxn()); got != rev {
			t.Fatalf("table revision moved from %d to %d while idle", rev, got)
		}
	})
}

// Re-asserting 1000 unchanged objects with DesiredWriter writes nothing and
// causes no Update; a real change is written and applied once.
func TestReassertUnchanged(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		f := newFixture(t, false)
		f.start()
		w := reconciler.DesiredWriter[*testObj]{
			Table:           f.table,
			Equal:           func(a, b *testObj) bool { return a.ID == b.ID && a.Value == b.Value },
			SetObjectStatus: setStatus,
		}
		assert := func(value int) (written int) {
			wtxn := f.db.WriteTxn(f.table)
			defer wtxn.Abort()
			for i := range 1000 {
				ok, err := w.Upsert(wtxn, &testObj{ID: fmt.Sprintf("o%04d", i), Value: value + i%2})
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					written++
				}
			}
			wtxn.Commit()
			return written
		}

		if n := assert(0); n != 1000 {
			t.Fatalf("first assertion wrote %d objects, want 1000", n)
		}
		f.mustReconcile()
		if n := f.target.Count(reconciler.OpUpdate, ""); n != 1000 {
			t.Fatalf("%d Updates, want 1000", n)
		}
		if n := f.countStatus(reconciler.StatusKindDone); n != 1000 {
			t.Fatalf("%d objects Done, want 1000", n)
		}

		rev := f.table.Revision(f.db.ReadTxn())
		if n := assert(0); n != 0 {
			t.Fatalf("re-asserting unchanged objects wrote %d, want 0", n)
		}
		if got := f.table.Revision(f.db.ReadTxn()); got != rev {
			t.Fatalf("re-asserting moved the table revision from %d to %d", rev, got)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := f.target.NumOps(); n != 1000 {
			t.Fatalf("%d operations after re-asserting, want still 1000", n)
		}

		// A change is written, and only the changed object is applied.
		wtxn := f.db.WriteTxn(f.table)
		if ok, err := w.Upsert(wtxn, &testObj{ID: "o0007", Value: 42}); !ok || err != nil {
			t.Fatalf("Upsert of a changed object: written=%v err=%v", ok, err)
		}
		if ok, err := w.Delete(wtxn, &testObj{ID: "o0008"}); !ok || err != nil {
			t.Fatalf("Delete: deleted=%v err=%v", ok, err)
		}
		wtxn.Commit()
		f.mustReconcile()
		if got := ops(f)[1000:]; !slices.Equal(got, []string{"update(o0007=42)", "delete(o0008)"}) {
			t.Fatalf("operations after one change and one delete: %v", got)
		}
	})
}

// With a BatchTarget, rounds of at most IncrementalRoundSize objects go to
// UpdateBatch and DeleteBatch, and each entry's Result decides its status;
// a failed entry is retried in a batch of its own.
func TestBatchTarget(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		f := newFixture(t, true)
		f.cfg.IncrementalRoundSize = 10
		f.cfg.RetryBackoffMin, f.cfg.RetryBackoffMax = time.Second, time.Second
		f.target.Inject("o0005", reconcilertest.Fault{})
		f.start()

		f.insertN("o", 25)
		if err := f.rec.Reconciled(); !errors.Is(err, reconciler.ErrNotAllReconciled) {
			t.Fatalf("Reconciled: %v", err)
		}
		batches := func() string { return fmt.Sprint(f.target.Batches()) }
		if got := batches(); got != "[update[10] update[10] update[5]]" {
			t.Fatalf("batches %s, want rounds of 10, 10 and 5", got)
		}
		f.waitStatus("o0005", reconciler.StatusKindError, "injected failure of o0005")
		if n := f.countStatus(reconciler.StatusKindDone); n != 24 {
			t.Fatalf("%d objects Done, want 24", n)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := batches(); got != "[update[10] update[10] update[5] update[1]]" {
			t.Fatalf("batches %s, want the failed entry retried alone", got)
		}
		f.target.Clear("o0005")
		time.Sleep(time.Second)
		f.waitStatus("o0005", reconciler.StatusKindDone, "")
		f.mustReconcile()

		before := len(f.target.Batches())
		keys := make([]string, 12)
		for i := range keys {
			keys[i] = fmt.Sprintf("o%04d", i)
		}
		f.delete(keys...)
		f.mustReconcile()
		if got := fmt.Sprint(f.target.Batches()[before:]); got != "[delete[10] delete[2]]" {
			t.Fatalf("delete batches %s, want [delete[10] delete[2]]", got)
		}
		if n := len(f.target.State()); n != 13 {
			t.Fatalf("real system has %d objects, want 13", n)
		}
	})
}

// WaitUntilReconciled returns once the changes up to a revision were
// attempted, reports failures with ErrNotAllReconciled, and honours its
// context.
func TestWaitUntilReconciled(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		f := newFixture(t, false)
		f.cfg.RetryBackoffMin, f.cfg.RetryBackoffMax = time.Hour, time.Hour
		f.target.Inject("bad", reconcilertest.Fault{Times: 1})

		// Not running: only the context ends the wait. After
		// synctest.Wait the waiting goroutine is blocked for good.
		rec, err := reconciler.New(f.db, f.cfg)
		if err != nil {
			t.Fatal(err)
		}
		rev := f.insert(&testObj{ID: "a", Value: 1})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { _, err := rec.WaitUntilReconciled(ctx, rev); done <- err }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("WaitUntilReconciled returned %v before Run", err)
		default:
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("WaitUntilReconciled before Run: %v, want Canceled", err)
		}

		f.start()
		got, err := f.rec.WaitUntilReconciled(t.Context(), rev)
		if err != nil || got < rev {
			t.Fatalf("WaitUntilReconciled(%d) = %d, %v", rev, got, err)
		}
		if obj, _ := f.get("a"); obj.Status.Kind != reconciler.StatusKindDone {
			t.Fatalf("a is %s after WaitUntilReconciled", obj.Status)
		}

		rev = f.insert(&testObj{ID: "bad", Value: 1})
		_, err = f.rec.WaitUntilReconciled(t.Context(), rev)
		if !errors.Is(err, reconciler.ErrNotAllReconciled) || !strings.Contains(err.Error(), "1 objects failing") {
			t.Fatalf("WaitUntilReconciled with a failed object: %v", err)
		}
		// The failure was attempted: the object says so.
		if obj, _ := f.get("bad"); obj.Status.Kind != reconciler.StatusKindError {
			t.Fatalf("bad is %s", obj.Status)
		}

		// A new version that succeeds clears the failure.
		rev = f.insert(&testObj{ID: "bad", Value: 2})
		if _, err := f.rec.WaitUntilReconciled(t.Context(), rev); err != nil {
			t.Fatalf("WaitUntilReconciled after the fix: %v", err)
		}
	})
}

// Running a reconciler twice at once is an error, not a second loop.
func TestRunTwice(t *testing.T) {
	f := newFixture(t, false)
	f.start()
	f.insert(&testObj{ID: "a", Value: 1})
	f.mustReconcile()
	if err := f.rec.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("second Run: %v", err)
	}
}

// Every target operation gets a context that is cancelled at shutdown: a
// blocked Update does not keep Run from returning.
func TestStopCancelsOperations(t *testing.T) {
	f := newFixture(t, false)
	f.target.Inject("a", reconcilertest.Fault{Block: true})
	f.start()
	f.insert(&testObj{ID: "a", Value: 1})
	f.target.WaitForBlocked(t, 1)
	f.rec.Stop() // fails the test if Run does not return
	if op := f.target.Ops()[0]; !op.Done || !errors.Is(op.Err, context.Canceled) {
		t.Fatalf("the blocked Update ended as %+v, want cancelled", op)
	}
	if last, _ := f.health.Last(); last.Level != reconcilertest.LevelStopped {
		t.Fatalf("last health report %v, want Stopped", last)
	}
}

// Put writes an object Pending without looking first: into an empty table,
// and over a stored object, Equal or not, which it returns.
func TestDesiredWriterPut(t *testing.T) {
	f := newFixture(t, false)
	w := reconciler.DesiredWriter[*testObj]{
		Table:           f.table,
		Equal:           func(a, b *testObj) bool { return a.ID == b.ID && a.Value == b.Value },
		SetObjectStatus: setStatus,
	}
	wtxn := f.db.WriteTxn(f.table)
	if old, had, err := w.Put(wtxn, &testObj{ID: "a", Value: 1}); err != nil || had || old != nil {
		t.Fatalf("Put into an empty table: %v, %v, %v; want nothing replaced", old, had, err)
	}
	wtxn.Commit()
	rev := f.table.Revision(f.db.ReadTxn())
	for _, v := range []int{1, 2} { // Equal to the stored one, then not
		wtxn := f.db.WriteTxn(f.table)
		old, had, err := w.Put(wtxn, &testObj{ID: "a", Value: v})
		wtxn.Commit()
		if err != nil || !had || old.Value == 0 {
			t.Fatalf("Put of value %d over a stored object: %v, %v, %v; want it replaced and returned", v, old, had, err)
		}
		got, objRev, _ := f.table.Get(f.db.ReadTxn(), idIndex.Query("a"))
		if got.Value != v || got.Status.Kind != reconciler.StatusKindPending || objRev <= rev {
			t.Fatalf("after Put of value %d: value %d, status %s at revision %d (was %d); want written, Pending", v, got.Value, got.Status.Kind, objRev, rev)
		}
		rev = objRev
	}
}
