package reconcilertest

import (
	"context"
	"slices"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
)

// Reporting drift. Every Target (and so every target made from it) is a
// reconciler.DriftTarget, but it watches nothing until ReportsDrift is
// called: WatchDrift then just waits for its context. After ReportsDrift,
// each WatchDrift reports ChangedAll as it starts, as the contract
// requires, and then passes on what the test reports with ReportDrift and
// ReportAllDrift, until its context ends or FailDriftWatch makes it fail.
// The real system does not report its own changes (SetState, RemoveState):
// the test says what a real system would have noticed.

var _ reconciler.DriftTarget[int] = (*Target[int])(nil)

// driftWatch is one running WatchDrift.
type driftWatch struct {
	drift reconciler.Drift
	fail  chan error // receives FailDriftWatch's error
}

// ReportsDrift makes t's WatchDrift watch (see above). Call it before the
// reconciler starts; it returns t.
func (t *Target[Obj]) ReportsDrift() *Target[Obj] {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.driftOn = true
	return t
}

// WatchDrift implements reconciler.DriftTarget. Without ReportsDrift it
// waits for ctx and returns nil. With it, it fails at once with the error
// of FailDriftWatch while that is in force; otherwise it reports
// ChangedAll, passes the test's reports on until ctx ends (nil) or
// FailDriftWatch is called (its error).
func (t *Target[Obj]) WatchDrift(ctx context.Context, drift reconciler.Drift) error {
	t.mu.Lock()
	if !t.driftOn {
		t.mu.Unlock()
		<-ctx.Done()
		return nil
	}
	if err := t.watchErr; err != nil {
		t.watchFailures++
		t.changed.wake()
		t.mu.Unlock()
		return err
	}
	w := &driftWatch{drift: drift, fail: make(chan error, 1)}
	t.watches = append(t.watches, w)
	t.changed.wake()
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.watches = slices.DeleteFunc(t.watches, func(x *driftWatch) bool { return x == w })
		t.changed.wake()
		t.mu.Unlock()
	}()
	drift.ChangedAll()
	select {
	case <-ctx.Done():
		return nil
	case err := <-w.fail:
		return err
	}
}

// ReportDrift reports the primary keys to every running WatchDrift's
// reconciler, as a real system's notification would.
func (t *Target[Obj]) ReportDrift(keys ...index.Key) {
	for _, w := range t.runningWatches() {
		for _, k := range keys {
			w.drift.Changed(k)
		}
	}
}

// ReportDriftPrefix reports the primary-key prefixes to every running
// WatchDrift's reconciler (Drift.ChangedPrefix).
func (t *Target[Obj]) ReportDriftPrefix(prefixes ...index.Key) {
	for _, w := range t.runningWatches() {
		for _, p := range prefixes {
			w.drift.ChangedPrefix(p)
		}
	}
}

// ReportAllDrift reports ChangedAll to every running WatchDrift's
// reconciler, as a real system that lost notifications would.
func (t *Target[Obj]) ReportAllDrift() {
	for _, w := range t.runningWatches() {
		w.drift.ChangedAll()
	}
}

// FailDriftWatch makes every running WatchDrift return err, and the later
// ones fail at once with it, until HealDriftWatch.
func (t *Target[Obj]) FailDriftWatch(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.watchErr = err
	for _, w := range t.watches {
		select {
		case w.fail <- err:
		default:
		}
	}
	t.changed.wake()
}

// HealDriftWatch lets WatchDrift watch again (see FailDriftWatch).
func (t *Target[Obj]) HealDriftWatch() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.watchErr = nil
	t.changed.wake()
}

// DriftWatches returns how many WatchDrift calls are watching now (after
// ReportsDrift), and how many failed at once since the target was made.
func (t *Target[Obj]) DriftWatches() (running, failed int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.watches), t.watchFailures
}

func (t *Target[Obj]) runningWatches() []*driftWatch {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.watches)
}
