package reconcilertest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/steadystate/steadystate/reconciler"
)

// Level is the level of a health report.
type Level string

// The levels, one per method of reconciler.Health.
const (
	LevelOK       Level = "OK"
	LevelDegraded Level = "Degraded"
	LevelStopped  Level = "Stopped"
)

// HealthReport is one call on a Health.
type HealthReport struct {
	Level  Level
	Reason string // OK's status, Degraded's or Stopped's reason
	Err    error  // Degraded's error
}

// String returns "Level: reason", with the error if there is one.
func (r HealthReport) String() string {
	if r.Err != nil {
		return fmt.Sprintf("%s: %s (%v)", r.Level, r.Reason, r.Err)
	}
	return fmt.Sprintf("%s: %s", r.Level, r.Reason)
}

// Health is a reconciler.Health that records every report. The zero value
// is ready to use; give a *Health as Config.Health.
type Health struct {
	mu      sync.Mutex
	changed notifier
	reports []HealthReport
	matched int // reports before this one were passed by WaitFor
}

var _ reconciler.Health = (*Health)(nil)

// OK records an OK report.
func (h *Health) OK(status string) { h.add(HealthReport{Level: LevelOK, Reason: status}) }

// Degraded records a Degraded report.
func (h *Health) Degraded(reason string, err error) {
	h.add(HealthReport{Level: LevelDegraded, Reason: reason, Err: err})
}

// Stopped records a Stopped report.
func (h *Health) Stopped(reason string) { h.add(HealthReport{Level: LevelStopped, Reason: reason}) }

func (h *Health) add(r HealthReport) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reports = append(h.reports, r)
	h.changed.wake()
}

// Reports returns every report so far, oldest first.
func (h *Health) Reports() []HealthReport {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.reports)
}

// Last returns the latest report, if there is one.
func (h *Health) Last() (HealthReport, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.reports) == 0 {
		return HealthReport{}, false
	}
	return h.reports[len(h.reports)-1], true
}

// Changed returns a channel that closes at the next report.
func (h *Health) Changed() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changed.watch()
}

// WaitFor waits for a report of level whose reason contains substr, and
// returns it. It looks at the report the previous WaitFor returned, if it
// is still the latest, and at every report made after it: a state that
// lasts (OK twice in a row) matches again, and a short-lived one (Degraded
// until a quick retry succeeds) is not missed.
func (h *Health) WaitFor(tb testing.TB, level Level, substr string) HealthReport {
	tb.Helper()
	var got HealthReport
	what := fmt.Sprintf("a health report %s containing %q", level, substr)
	waitUntil(tb, what, h.lastFew, h.Changed, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		for i := min(h.matched, max(len(h.reports)-1, 0)); i < len(h.reports); i++ {
			if r := h.reports[i]; r.Level == level && strings.Contains(r.Reason, substr) {
				got, h.matched = r, i+1
				return true
			}
		}
		return false
	})
	return got
}

// lastFew describes the latest reports, for a failure message.
func (h *Health) lastFew() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return fmt.Sprintf("%d reports, the latest %q", len(h.reports), h.reports[max(len(h.reports)-3, 0):])
}
