package job_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/job"
)

func TestTimerInterval(t *testing.T) {
	var runs atomic.Int32
	t0 := time.Now()
	h := startJobs(t, job.Timer("tick", func(context.Context) error {
		runs.Add(1)
		return nil
	}, 10*time.Millisecond))
	waitFor(t, "3 runs", func() bool { return runs.Load() >= 3 })
	if d := time.Since(t0); d < 30*time.Millisecond {
		t.Fatalf("3 runs after %v, want at least 3 intervals", d)
	}
	waitLevel(t, h, "m.tick", cell.LevelOK, "ran")
}

func TestTimerTrigger(t *testing.T) {
	trig := job.NewTrigger()
	runs := make(chan struct{})
	fail := atomic.Bool{}
	h := startJobs(t, job.Timer("on-demand", func(ctx context.Context) error {
		select {
		case runs <- struct{}{}:
		case <-ctx.Done():
		}
		if fail.Load() {
			return errors.New("bad run")
		}
		return nil
	}, 0, job.WithTrigger(trig)))

	select {
	case <-runs:
		t.Fatal("ran without a trigger")
	case <-time.After(20 * time.Millisecond):
	}
	for i := range 3 {
		trig.Trigger()
		select {
		case <-runs:
		case <-time.After(10 * time.Second):
			t.Fatalf("trigger %d did not run the timer", i)
		}
	}
	fail.Store(true)
	trig.Trigger()
	trig.Trigger() // coalesced with the pending one, or one more run
	<-runs
	st := waitLevel(t, h, "m.on-demand", cell.LevelDegraded, "run failed")
	if st.Error != "bad run" {
		t.Fatalf("error %q", st.Error)
	}
	// Drain a possible coalesced second run so the job can stop.
	select {
	case <-runs:
	case <-time.After(20 * time.Millisecond):
	}
}
