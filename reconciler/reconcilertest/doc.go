// Package reconcilertest provides helpers for testing code that uses a
// reconciler, in the style of net/http/httptest: a reconciler run in the
// background of a test or benchmark, a recording Target that misbehaves on
// demand, and a recording Health.
//
// # Basics
//
// Start runs a reconciler until the test ends (or Stop is called) and
// waits for it to return, so that no goroutine outlives the test:
//
//	target := reconcilertest.NewTarget(func(r *Route) string { return r.Prefix.String() })
//	r := reconcilertest.Start(t, db, reconciler.Config[*Route]{..., Target: target})
//	// write desired objects as Pending, then:
//	if err := r.Reconciled(); err != nil { t.Fatal(err) }
//	ops := target.Ops() // every Update, Delete and Prune, in order
//
// Target records every operation in the order the reconciler made it, with
// the object and the outcome, and keeps the "real system" it stands for as
// a map from key to the last object applied, which a test can change
// behind the reconciler's back to simulate drift. Inject makes operations
// on a key fail (a number of times or until cleared, with a plain or a
// terminal error), panic, or block until released or cancelled.
// Target.Batch gives the same target with reconciler.BatchTarget, and
// Planner with reconciler.Planner (and, for a batch target,
// reconciler.BatchPlanner). Every Target is a reconciler.DriftTarget that
// reports nothing until ReportsDrift; then the test says what the real
// system would have noticed with ReportDrift, ReportDriftPrefix and
// ReportAllDrift, and FailDriftWatch makes the watch fail.
//
// # Waiting
//
// Every wait of this package is woken by a channel when what it waits for
// may have changed (Target.Changed, Health.Changed), never by polling, and
// fails the test after Timeout. A check that something did not happen
// should be exact: wait with Reconciler.Reconciled until the reconciler has
// attempted every change so far, then count the operations; or run the
// test inside testing/synctest's Test, where synctest.Wait returns once
// every goroutine of the test (the reconciler's included) is blocked, and
// where time.Sleep advances a fake clock that fires every timer due
// meanwhile. Everything in this package works inside a synctest bubble
// when it is created there.
//
// The helpers are safe for concurrent use. Methods that take a
// testing.TB call its Fatal, so they belong on the test's goroutine.
package reconcilertest
