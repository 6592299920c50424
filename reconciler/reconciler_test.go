package reconciler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// Scenarios that need precise interleaving or many objects, and so are
// written in Go rather than as testdata scripts.

// An object changed while its Update is in flight: the Done of the old
// version is not written over the new version, and the new version is
// reconciled in turn.
func TestUpdateInFlight(t *testing.T) {
	f := newFixture(t, false)
	release1 := f.target.hold("a")
	f.start()

	f.insert(&testObj{ID: "a", Value: 1})
	waitUntil(t, "Update of a=1 in flight", f.target.watch(func(tt *testTarget) bool { return tt.held == 1 }))

	// The writer commits a new version while a=1 is being applied; hold
	// the Update of the new version too, to look at the table meanwhile.
	f.insert(&testObj{ID: "a", Value: 2})
	release2 := f.target.hold("a")
	release1()

	waitUntil(t, "Update of a=2 in flight", f.target.watch(func(tt *testTarget) bool {
		return tt.held == 1 && slices.Equal(tt.ops, []string{"update(a=1)", "update(a=2)"})
	}))
	if obj, _ := f.get("a"); obj.Value != 2 || obj.Status.Kind != StatusKindPending {
		t.Fatalf("while a=2 is in flight the table holds %v, want a=2 still Pending (the stale Done of a=1 must not be written)", obj)
	}

	release2()
	if obj := f.waitStatus("a", StatusKindDone, ""); obj.Value != 2 {
		t.Fatalf("final object %v, want a=2 Done", obj)
	}
	f.mustReconcile()
	if got := f.target.opsList(); !slices.Equal(got, []string{"update(a=1)", "update(a=2)"}) {
		t.Fatalf("target operations %v", got)
	}
	if got := f.target.realState()["a"]; got != 2 {
		t.Fatalf("real a=%d, want 2", got)
	}
}

// An object deleted while its Update is in flight: the Done of the update
// is not written (the object is gone) and the delete is applied after it.
func TestDeleteWhileInFlight(t *testing.T) {
	f := newFixture(t, false)
	release := f.target.hold("a")
	f.start()
	f.insert(&testObj{ID: "a", Value: 1})
	waitUntil(t, "Update of a=1 in flight", f.target.watch(func(tt *testTarget) bool { return tt.held == 1 }))
	f.delete("a")
	release()
	waitUntil(t, "the delete", f.target.watch(func(tt *testTarget) bool {
		return slices.Equal(tt.ops, []string{"update(a=1)", "delete(a)"})
	}))
	f.mustReconcile()
	if _, found := f.get("a"); found {
		t.Fatal("a is back in the table: the status of the in-flight Update was written over the delete")
	}
	if real := f.target.realState(); len(real) != 0 {
		t.Fatalf("real system %v, want empty", real)
	}
}

// One object failing forever (and retried every few milliseconds) does not
// hold back 1000 others: they are all Done in a time comparable to a run
// without the failing object.
func TestOneFailingDoesNotDelayOthers(t *testing.T) {
	const n = 1000
	run := func(failing bool) time.Duration {
		f := newFixture(t, false)
		if failing {
			f.target.set("bad", &behavior{forever: true})
		}
		f.start()
		objs := make([]*testObj, 0, n+1)
		if failing {
			objs = append(objs, &testObj{ID: "bad", Value: 1}) // first in the first round
		}
		for i := range n {
			objs = append(objs, &testObj{ID: fmt.Sprintf("ok%04d", i), Value: i})
		}
		start := time.Now()
		f.insert(objs...)
		_, err := f.waitReconciled()
		elapsed := time.Since(start)
		if failing != errors.Is(err, ErrNotAllReconciled) {
			t.Fatalf("failing=%v: WaitUntilReconciled: %v", failing, err)
		}
		if done := f.countStatus(StatusKindDone); done != n {
			t.Fatalf("failing=%v: %d objects Done, want %d", failing, done, n)
		}
		if failing {
			f.waitStatus("bad", StatusKindError, "injected failure")
			if f.target.count("update(bad=") < 2 {
				t.Errorf("the failing object was not retried")
			}
		}
		f.stop()
		return elapsed
	}
	base := run(false)
	withFailing := run(true)
	t.Logf("1000 objects: %v alone, %v with one failing forever", base, withFailing)
	if limit := 3*base + 500*time.Millisecond; withFailing > limit {
		t.Fatalf("with one failing object the others took %v, more than %v (3x %v + 500ms)", withFailing, limit, base)
	}
}

// After convergence the reconciler is quiet: its own status writes cause
// no further Update and nothing is written to the table.
func TestNoUpdatesWhenIdle(t *testing.T) {
	f := newFixture(t, false)
	f.target.set("term", &behavior{terminal: true}) // an Error that is never retried
	f.start()
	f.insertN("o", 100)
	f.insert(&testObj{ID: "term", Value: 1})
	if _, err := f.waitReconciled(); !errors.Is(err, ErrNotAllReconciled) {
		t.Fatalf("WaitUntilReconciled: %v", err)
	}
	f.waitStatus("term", StatusKindError, "terminal")
	ops := len(f.target.opsList())
	rev := f.table.Revision(f.db.ReadTxn())

	time.Sleep(200 * time.Millisecond)
	if got := f.target.opsList()[ops:]; len(got) > 0 {
		t.Fatalf("target operations while idle: %v", got)
	}
	if got := f.table.Revision(f.db.ReadTxn()); got != rev {
		t.Fatalf("table revision moved from %d to %d while idle", rev, got)
	}
	if ops != 101 {
		t.Fatalf("%d target operations to converge, want 101", ops)
	}
}

// Re-asserting 1000 unchanged objects with DesiredWriter writes nothing and
// causes no Update; a real change is written and applied once.
func TestReassertUnchanged(t *testing.T) {
	f := newFixture(t, false)
	f.start()
	w := DesiredWriter[*testObj]{
		Table:           f.table,
		Equal:           func(a, b *testObj) bool { return a.ID == b.ID && a.Value == b.Value },
		SetObjectStatus: setTestStatus,
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
	if n := f.target.count("update("); n != 1000 {
		t.Fatalf("%d Updates, want 1000", n)
	}
	if n := f.countStatus(StatusKindDone); n != 1000 {
		t.Fatalf("%d objects Done, want 1000", n)
	}

	rev := f.table.Revision(f.db.ReadTxn())
	if n := assert(0); n != 0 {
		t.Fatalf("re-asserting unchanged objects wrote %d, want 0", n)
	}
	if got := f.table.Revision(f.db.ReadTxn()); got != rev {
		t.Fatalf("re-asserting moved the table revision from %d to %d", rev, got)
	}
	f.mustReconcile()
	time.Sleep(50 * time.Millisecond)
	if n := f.target.count("update("); n != 1000 {
		t.Fatalf("%d Updates after re-asserting, want still 1000", n)
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
	if got := f.target.opsList()[1000:]; !slices.Equal(got, []string{"update(o0007=42)", "delete(o0008)"}) {
		t.Fatalf("operations after one change and one delete: %v", got)
	}
}

// With a BatchTarget, rounds of at most IncrementalRoundSize objects go to
// UpdateBatch and DeleteBatch, and each entry's Result decides its status.
func TestBatchTarget(t *testing.T) {
	f := newFixture(t, true)
	bt := f.cfg.Target.(testBatchTarget)
	f.cfg.IncrementalRoundSize = 10
	f.target.set("o0005", &behavior{forever: true})
	f.start()

	f.insertN("o", 25)
	if _, err := f.waitReconciled(); !errors.Is(err, ErrNotAllReconciled) {
		t.Fatalf("WaitUntilReconciled: %v", err)
	}
	// Retries of the failing entry (batches of one) may come between the
	// rounds.
	rounds := slices.DeleteFunc(bt.batchList(), func(b string) bool { return b == "update[1]" })
	if !slices.Equal(rounds, []string{"update[10]", "update[10]", "update[5]"}) {
		t.Fatalf("batches %v, want rounds of 10, 10 and 5 (and retries of 1)", bt.batchList())
	}
	f.waitStatus("o0005", StatusKindError, "injected failure of o0005")
	if n := f.countStatus(StatusKindDone); n != 24 {
		t.Fatalf("%d objects Done, want 24", n)
	}
	// The failing entry is retried on its own.
	waitUntil(t, "a retry batch of one", bt.watch(func(tt *testTarget) bool {
		return slices.Contains(tt.batches, "update[1]")
	}))
	f.target.set("o0005", nil)
	f.waitStatus("o0005", StatusKindDone, "")
	f.mustReconcile()

	before := len(bt.batchList())
	keys := make([]string, 12)
	for i := range keys {
		keys[i] = fmt.Sprintf("o%04d", i)
	}
	f.delete(keys...)
	f.mustReconcile()
	if got := bt.batchList()[before:]; !slices.Equal(got, []string{"delete[10]", "delete[2]"}) {
		t.Fatalf("delete batches %v, want [delete[10] delete[2]]", got)
	}
	if n := len(f.target.realState()); n != 13 {
		t.Fatalf("real system has %d objects, want 13", n)
	}
}

// A panic in a batch fails every entry of the batch (documented in
// batchOp); once the culprit behaves, everything is Done.
func TestBatchPanic(t *testing.T) {
	f := newFixture(t, true)
	f.target.set("a", &behavior{panics: true})
	f.start()
	f.insert(&testObj{ID: "a", Value: 1}, &testObj{ID: "b", Value: 2})
	f.waitStatus("a", StatusKindError, "panic")
	f.target.set("a", nil)
	f.waitStatus("a", StatusKindDone, "")
	f.waitStatus("b", StatusKindDone, "")
	f.mustReconcile()
}

// WaitUntilReconciled returns once the changes up to a revision were
// attempted, reports failures with ErrNotAllReconciled, and honours its
// context.
func TestWaitUntilReconciled(t *testing.T) {
	f := newFixture(t, false)
	f.cfg.RetryBackoffMin, f.cfg.RetryBackoffMax = time.Hour, time.Hour
	f.target.set("bad", &behavior{failN: 1})

	// Not running yet: only the context ends the wait.
	rec, err := New(f.db, f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	rev := f.insert(&testObj{ID: "a", Value: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	if _, err := rec.WaitUntilReconciled(ctx, rev); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitUntilReconciled before Run: %v, want DeadlineExceeded", err)
	}
	cancel()

	f.start()
	ctx, cancel = context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	got, err := f.rec.WaitUntilReconciled(ctx, rev)
	if err != nil || got < rev {
		t.Fatalf("WaitUntilReconciled(%d) = %d, %v", rev, got, err)
	}
	if obj, _ := f.get("a"); obj.Status.Kind != StatusKindDone {
		t.Fatalf("a is %v after WaitUntilReconciled", obj)
	}

	rev = f.insert(&testObj{ID: "bad", Value: 1})
	_, err = f.rec.WaitUntilReconciled(ctx, rev)
	if !errors.Is(err, ErrNotAllReconciled) || !strings.Contains(err.Error(), "1 objects failing") {
		t.Fatalf("WaitUntilReconciled with a failed object: %v", err)
	}
	// The failure was attempted: the object says so.
	if obj, _ := f.get("bad"); obj.Status.Kind != StatusKindError {
		t.Fatalf("bad is %v", obj)
	}

	// A new version that succeeds clears the failure.
	rev = f.insert(&testObj{ID: "bad", Value: 2})
	if _, err := f.rec.WaitUntilReconciled(ctx, rev); err != nil {
		t.Fatalf("WaitUntilReconciled after the fix: %v", err)
	}
}

// Running a reconciler twice at once is an error, not a second loop.
func TestRunTwice(t *testing.T) {
	f := newFixture(t, false)
	f.start()
	f.insert(&testObj{ID: "a", Value: 1})
	f.mustReconcile()
	if err := f.rec.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("second Run: %v", err)
	}
}

// The status index makes "all objects in Error" a table query.
func TestStatusIndexQuery(t *testing.T) {
	f := newFixture(t, false)
	bad := []string{"o0002", "o0005", "o0007"}
	for _, k := range bad {
		f.target.set(k, &behavior{forever: true})
	}
	f.start()
	f.insertN("o", 10)
	if _, err := f.waitReconciled(); !errors.Is(err, ErrNotAllReconciled) {
		t.Fatalf("WaitUntilReconciled: %v", err)
	}
	for _, k := range bad {
		f.waitStatus(k, StatusKindError, "")
	}
	txn := f.db.ReadTxn()
	var inError []string
	for obj := range f.table.List(txn, testStatusIndex.Query(StatusKindError)) {
		inError = append(inError, obj.ID)
	}
	if !slices.Equal(inError, bad) {
		t.Fatalf("objects in Error: %v, want %v", inError, bad)
	}
	q, err := testStatusIndex.QueryString("done")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range f.table.List(txn, q) {
		n++
	}
	if n != 7 {
		t.Fatalf("%d objects Done, want 7", n)
	}
	if _, err := testStatusIndex.QueryString("bogus"); err == nil {
		t.Fatal("QueryString(bogus) did not fail")
	}
}

// Status kinds read and print by name.
func TestStatusKind(t *testing.T) {
	for k, name := range map[StatusKind]string{
		StatusKindUnset: "", StatusKindPending: "Pending", StatusKindRefreshing: "Refreshing",
		StatusKindDone: "Done", StatusKindError: "Error",
	} {
		if k.String() != name {
			t.Errorf("%d.String() = %q, want %q", k, k.String(), name)
		}
		var back StatusKind
		if err := back.UnmarshalText([]byte(name)); err != nil || back != k {
			t.Errorf("UnmarshalText(%q) = %v, %v", name, back, err)
		}
	}
	if s := StatusError(errors.New("boom")); s.Kind != StatusKindError || s.Error != "boom" || s.String() != "Error: boom" {
		t.Errorf("StatusError: %+v", s)
	}
	for _, s := range []Status{StatusPending(), StatusRefreshing()} {
		if !s.IsPending() || s.UpdatedAt.IsZero() {
			t.Errorf("%v: IsPending=false or no time", s)
		}
	}
	if StatusDone().IsPending() {
		t.Error("Done is pending")
	}
	if !IsTerminal(fmt.Errorf("wrapped: %w", Terminal(errors.New("x")))) || IsTerminal(errors.New("x")) || Terminal(nil) != nil {
		t.Error("Terminal/IsTerminal")
	}
}

// Every target operation gets a context that is cancelled at shutdown: a
// hanging Update does not keep Run from returning.
func TestStopCancelsOperations(t *testing.T) {
	f := newFixture(t, false)
	f.target.set("a", &behavior{hang: true})
	f.start()
	f.insert(&testObj{ID: "a", Value: 1})
	waitUntil(t, "Update of a in flight", f.target.watch(func(tt *testTarget) bool { return tt.held == 1 }))
	f.stop() // fails the test if Run does not return
	if last := f.health.last(); last.level != "Stopped" {
		t.Fatalf("last health report %+v, want Stopped", last)
	}
}

// backoff grows exponentially from min, is capped at max and jitters by at
// most 25%.
func TestBackoff(t *testing.T) {
	for attempts, want := range map[int]time.Duration{1: 10, 2: 20, 3: 40, 4: 80, 10: 100} {
		for range 100 {
			got := backoff(attempts, 10, 100)
			if got < want || got > min(want+want/4, 100) {
				t.Fatalf("backoff(%d, 10, 100) = %d, want %d..%d", attempts, got, want, min(want+want/4, 100))
			}
		}
	}
}

// The retry queue keeps one retry per key, in time order.
func TestRetryQueue(t *testing.T) {
	q := newRetryQueue[*testObj]()
	now := time.Now()
	q.add(&retryItem[*testObj]{key: "a", at: now.Add(3)})
	q.add(&retryItem[*testObj]{key: "b", at: now.Add(1)})
	q.add(&retryItem[*testObj]{key: "a", at: now.Add(2)}) // replaces a
	q.add(&retryItem[*testObj]{key: "c", at: now.Add(time.Hour)})
	q.remove("c")
	q.remove("nope")
	if q.len() != 2 {
		t.Fatalf("len %d, want 2", q.len())
	}
	var keys []string
	for _, it := range q.popDue(now.Add(10), 10) {
		keys = append(keys, it.key)
	}
	if !slices.Equal(keys, []string{"b", "a"}) || q.len() != 0 {
		t.Fatalf("popDue: %v, %d left", keys, q.len())
	}
	if _, ok := q.next(); ok {
		t.Fatal("next on an empty queue")
	}
}

// eventually polls cond, for conditions nothing can be watched for.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", waitTimeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
