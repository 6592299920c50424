package job_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/health"
	"github.com/steadystate/steadystate/hive/job"
)

// TestPanicsAreJobErrors: a panic in a job's function degrades that job
// (and is retried like a failure) instead of crashing the program.
func TestPanicsAreJobErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		h := startJobs(t,
			job.OneShot("once", func(context.Context, cell.Health) error {
				if calls.Add(1) == 1 {
					panic("boom")
				}
				return nil
			}, job.WithRetry(1, time.Millisecond, time.Millisecond)),
			job.Timer("tick", func(context.Context) error { panic("tick boom") }, time.Millisecond),
		)
		settle(10 * time.Millisecond)
		wantLevel(t, h, "m.once", health.LevelStopped, "done")
		st := wantLevel(t, h, "m.tick", health.LevelDegraded, "run failed")
		if !strings.Contains(st.Error, "job panicked: tick boom") {
			t.Fatalf("timer error = %q", st.Error)
		}
		if calls.Load() != 2 {
			t.Fatalf("one-shot ran %d times, want 2 (a panic, then the retry)", calls.Load())
		}
	})
}
