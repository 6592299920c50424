package job_test

import (
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/health"
	"github.com/steadystate/steadystate/hive/hivetest"
	"github.com/steadystate/steadystate/hive/job"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("os/signal.signal_recv"))
}

// quiet discards the logs of hives that do not run through hivetest.
var quiet = slog.New(slog.DiscardHandler)

// startJobs starts a hive with one module "m" whose group runs jobs, and
// stops it when the test ends.
func startJobs(t *testing.T, jobs ...job.Job) *hive.Hive {
	t.Helper()
	return hivetest.Start(t, cell.Module("m", "M", cell.Invoke(func(g job.Group) error { return g.Add(jobs...) })))
}

// settle lets d pass on the bubble's clock and then waits until every
// goroutine of the bubble is blocked, so whatever was due has happened
// and nothing else is under way.
func settle(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// scope returns the status of the scope id in h's health tree.
func scope(h *hive.Hive, id string) (health.Status, bool) {
	return find(h.Health().Snapshot(), id)
}

func find(s health.Status, id string) (health.Status, bool) {
	if s.ID == id {
		return s, true
	}
	for _, c := range s.Children {
		if f, ok := find(c, id); ok {
			return f, true
		}
	}
	return health.Status{}, false
}

// wantLevel fails the test unless scope id has level and message now.
func wantLevel(t *testing.T, h *hive.Hive, id string, level health.Level, msg string) health.Status {
	t.Helper()
	st, ok := scope(h, id)
	if !ok || st.Level != level || st.Message != msg {
		t.Fatalf("scope %s = %+v (present %v), want %s %q", id, st, ok, level, msg)
	}
	return st
}
