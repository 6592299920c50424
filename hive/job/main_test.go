package job_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/health"
	"github.com/steadystate/steadystate/hive/job"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("os/signal.signal_recv"))
}

var quiet = hive.Options{Logger: slog.New(slog.DiscardHandler)}

// startJobs starts a hive with one module "m" whose group runs jobs, and
// stops it when the test ends.
func startJobs(t *testing.T, jobs ...job.Job) *hive.Hive {
	t.Helper()
	h := hive.NewWithOptions(quiet, cell.Module("m", "M", cell.Invoke(func(g job.Group) { g.Add(jobs...) })))
	if err := h.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return h
}

// find returns the status with the id, if present.
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

// waitFor polls cond until it holds or the test times out.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitLevel waits until the scope id has level and message.
func waitLevel(t *testing.T, h *hive.Hive, id string, level cell.Level, msg string) health.Status {
	t.Helper()
	var st health.Status
	waitFor(t, id+" to be "+string(level)+" "+msg, func() bool {
		var ok bool
		st, ok = find(h.Health().Snapshot(), id)
		return ok && st.Level == level && st.Message == msg
	})
	return st
}
