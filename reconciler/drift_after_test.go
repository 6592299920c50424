package reconciler_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
)

// The tests of Config.WatchDriftAfter: the drift watch waits for the
// channel, loses nothing meanwhile, and never outlives Run.

// watchCounter is the fixture's planner target with its WatchDrift calls
// counted.
type watchCounter struct {
	reconcilertest.PlannerTarget[*testObj]
	calls atomic.Int64
}

func (w *watchCounter) WatchDrift(ctx context.Context, drift reconciler.Drift) error {
	w.calls.Add(1)
	return w.PlannerTarget.WatchDrift(ctx, drift)
}

// newWatchFixture returns a fixture, not started, whose target reports
// drift, plans, and counts its watches, with WatchDriftAfter set to after.
// A failed object is retried only after an hour: within a test (the
// bubble's clock stands still while the test waits with settle) only a
// drift report can bring its retry forward.
func newWatchFixture(t *testing.T, after <-chan struct{}) (*fixture, *watchCounter) {
	f := newFixture(t, false)
	f.target.ReportsDrift()
	f.withPlanner()
	w := &watchCounter{PlannerTarget: f.cfg.Target.(reconcilertest.PlannerTarget[*testObj])}
	f.cfg.Target = w
	f.cfg.WatchDriftAfter = after
	f.cfg.RetryBackoffMin, f.cfg.RetryBackoffMax = time.Hour, time.Hour
	return f, w
}

// driftCounts returns the drift metrics so far: reports, objects checked,
// drift repaired.
func (f *fixture) driftCounts() (reports, checked, repaired int) {
	m := f.metrics
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reports, m.checked, m.drift
}

// While WatchDriftAfter is open nothing watches: objects are reconciled,
// a lost one stays lost. Once it is closed the watch starts (once), its
// ChangedAll checks every Done object, repairs the lost one and retries
// the failing one at once; later reports are passed on as usual.
func TestWatchDriftAfter(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		const n = 10
		after := make(chan struct{})
		f, w := newWatchFixture(t, after)
		f.target.Inject("o0009", reconcilertest.Fault{Times: 1}) // fails once, retried in an hour
		f.start()
		f.insertN("o", n)
		settle()
		if got := w.calls.Load(); got != 0 {
			t.Fatalf("WatchDrift called %d times before WatchDriftAfter closed, want 0", got)
		}
		if err := f.rec.Reconciled(); !errors.Is(err, reconciler.ErrNotAllReconciled) {
			t.Fatalf("Reconciled = %v, want o0009 failing", err)
		}
		if got := f.countStatus(reconciler.StatusKindDone); got != n-1 {
			t.Fatalf("%d objects Done, want %d (all but o0009)", got, n-1)
		}

		// The real system loses o0002; nothing watches, nothing repairs it.
		f.target.RemoveState("o0002")
		settle()
		if got := w.calls.Load(); got != 0 {
			t.Errorf("WatchDrift called %d times before WatchDriftAfter closed, want 0", got)
		}
		if running, failed := f.target.DriftWatches(); running != 0 || failed != 0 {
			t.Errorf("%d watches running, %d failed, before WatchDriftAfter closed; want none", running, failed)
		}
		if reports, checked, repaired := f.driftCounts(); reports != 0 || checked != 0 || repaired != 0 {
			t.Errorf("%d drift reports, %d checked, %d repaired before the watch; want none", reports, checked, repaired)
		}
		if _, ok := f.target.State()["o0002"]; ok {
			t.Errorf("o0002 repaired before the watch started")
		}
		if got := f.target.Count(reconciler.OpUpdate, ""); got != n {
			t.Errorf("%d Updates before the watch, want %d (one each)", got, n)
		}

		close(after)
		settle()
		if got := w.calls.Load(); got != 1 {
			t.Errorf("WatchDrift called %d times once WatchDriftAfter closed, want 1", got)
		}
		if running, _ := f.target.DriftWatches(); running != 1 {
			t.Errorf("%d watches running, want 1", running)
		}
		// The ChangedAll checks the n-1 Done objects; o0009, in Error, is
		// retried instead.
		if reports, checked, repaired := f.driftCounts(); reports != 1 || checked != n-1 || repaired != 1 {
			t.Errorf("after the watch's ChangedAll: %d reports, %d checked, %d repaired; want 1, %d, 1", reports, checked, repaired, n-1)
		}
		if got := f.target.Count(reconciler.OpUpdate, "o0002"); got != 2 {
			t.Errorf("%d Updates of the lost o0002, want 2 (its first and the repair)", got)
		}
		if got := f.target.Count(reconciler.OpUpdate, "o0009"); got != 2 {
			t.Errorf("%d Updates of the failing o0009, want 2 (the failure and the retry the ChangedAll brought forward)", got)
		}
		if got := f.target.Count(reconciler.OpUpdate, ""); got != n+2 {
			t.Errorf("%d Updates, want %d: a check of an object that did not drift must not apply it", got, n+2)
		}
		if got := len(f.target.State()); got != n {
			t.Errorf("the real system holds %d objects, want %d", got, n)
		}
		f.mustReconcile()
		if got := f.countStatus(reconciler.StatusKindDone); got != n {
			t.Errorf("%d objects Done, want %d", got, n)
		}

		// A report of one object, as the real system would send it.
		f.target.RemoveState("o0005")
		f.target.ReportDrift(index.String("o0005"))
		settle()
		if reports, checked, repaired := f.driftCounts(); reports != 2 || checked != n || repaired != 2 {
			t.Errorf("after Changed(o0005): %d reports, %d checked, %d repaired; want 2, %d, 2", reports, checked, repaired, n)
		}
		if _, ok := f.target.State()["o0005"]; !ok {
			t.Errorf("the reported o0005 was not repaired")
		}
		if got := f.target.Count(reconciler.OpUpdate, "o0005"); got != 2 {
			t.Errorf("%d Updates of o0005, want 2", got)
		}
		if got := w.calls.Load(); got != 1 {
			t.Errorf("WatchDrift called %d times in all, want 1", got)
		}
	})
}

// A Run stopped while WatchDriftAfter is still open returns, and leaves
// no goroutine waiting for the channel (the bubble would report it when
// the test ends; goleak too).
func TestWatchDriftAfterStop(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		f, w := newWatchFixture(t, make(chan struct{}))
		f.start()
		f.insertN("o", 3)
		settle()
		f.mustReconcile()

		f.rec.Stop()
		select {
		case <-f.rec.Stopped():
		default:
			t.Fatal("Run has not returned after Stop")
		}
		if got := w.calls.Load(); got != 0 {
			t.Errorf("WatchDrift called %d times, want 0: WatchDriftAfter was never closed", got)
		}
		if last, _ := f.health.Last(); last.Level != reconcilertest.LevelStopped {
			t.Errorf("health %v after Stop, want Stopped", last)
		}
		settle()
	})
}

// Without WatchDriftAfter (nil), or with one already closed, the watch
// starts with Run, before any object exists, and reports what it is told
// from then on.
func TestWatchDriftAfterNil(t *testing.T) {
	closed := make(chan struct{})
	close(closed)
	for _, tc := range []struct {
		name  string
		after <-chan struct{}
	}{{"nil", nil}, {"closed", closed}} {
		t.Run(tc.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T) {
				f, w := newWatchFixture(t, tc.after)
				f.start()
				settle()
				if got := w.calls.Load(); got != 1 {
					t.Errorf("WatchDrift called %d times once Run started, want 1", got)
				}
				if running, _ := f.target.DriftWatches(); running != 1 {
					t.Errorf("%d watches running, want 1", running)
				}
				if reports, checked, _ := f.driftCounts(); reports != 1 || checked != 0 {
					t.Errorf("%d reports, %d checked on an empty table; want the watch's ChangedAll and nothing checked", reports, checked)
				}

				f.insertN("o", 3)
				settle()
				f.mustReconcile()
				f.target.RemoveState("o0001")
				f.target.ReportDrift(index.String("o0001"))
				settle()
				if reports, checked, repaired := f.driftCounts(); reports != 2 || checked != 1 || repaired != 1 {
					t.Errorf("after Changed(o0001): %d reports, %d checked, %d repaired; want 2, 1, 1", reports, checked, repaired)
				}
				if got := w.calls.Load(); got != 1 {
					t.Errorf("WatchDrift called %d times in all, want 1", got)
				}
			})
		})
	}
}
