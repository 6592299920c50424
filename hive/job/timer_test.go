package job_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadystate/steadystate/hive/health"
	"github.com/steadystate/steadystate/hive/job"
)

func TestTimerInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int32
		h := startJobs(t, job.Timer("tick", func(context.Context) error {
			runs.Add(1)
			time.Sleep(time.Millisecond) // intervals count from the end of a run
			return nil
		}, 10*time.Millisecond))
		settle(9 * time.Millisecond)
		if n := runs.Load(); n != 0 {
			t.Fatalf("%d runs before the first interval", n)
		}
		wantLevel(t, h, "m.tick", health.LevelOK, "waiting for first run")
		// Runs start at 10ms, 21ms and 32ms.
		settle(32*time.Millisecond - 9*time.Millisecond)
		if n := runs.Load(); n != 3 {
			t.Fatalf("%d runs after 32ms, want 3", n)
		}
		wantLevel(t, h, "m.tick", health.LevelOK, "ran")
	})
}

func TestTimerTrigger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		trig := job.NewTrigger()
		var runs atomic.Int32
		hold := make(chan struct{}) // a run waits on it while it is non-nil
		var held atomic.Bool
		var fail atomic.Bool
		h := startJobs(t, job.Timer("on-demand", func(ctx context.Context) error {
			runs.Add(1)
			if held.Load() {
				select {
				case <-hold:
				case <-ctx.Done():
				}
			}
			if fail.Load() {
				return errors.New("bad run")
			}
			return nil
		}, 0, job.WithTrigger(trig)))

		// An interval of zero runs only when triggered.
		settle(time.Hour)
		if n := runs.Load(); n != 0 {
			t.Fatalf("%d runs without a trigger", n)
		}
		for i := range 3 {
			trig.Trigger()
			synctest.Wait()
			if n := runs.Load(); n != int32(i+1) {
				t.Fatalf("trigger %d: %d runs", i+1, n)
			}
		}
		// Triggers that arrive while a run is under way coalesce into one
		// more run.
		held.Store(true)
		trig.Trigger()
		synctest.Wait() // run 4 is holding
		trig.Trigger()
		trig.Trigger()
		trig.Trigger()
		held.Store(false)
		fail.Store(true)
		hold <- struct{}{}
		settle(time.Hour)
		if n := runs.Load(); n != 5 {
			t.Fatalf("%d runs, want 5 (three triggers during run 4 make one run)", n)
		}
		st := wantLevel(t, h, "m.on-demand", health.LevelDegraded, "run failed")
		if st.Error != "bad run" {
			t.Fatalf("error %q", st.Error)
		}
	})
}
