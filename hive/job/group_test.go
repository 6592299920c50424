package job_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/health"
	"github.com/steadystate/steadystate/hive/hivetest"
	"github.com/steadystate/steadystate/hive/job"
)

type database struct{ started bool }

func TestJobsStartAfterDependencies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var events []string
		record := func(s string) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, s)
		}
		h := hive.NewWithOptions(hive.Options{Logger: quiet},
			cell.Module("app", "App",
				// The group is asked for before the database is
				// constructed, yet the job must start after the
				// database's hook.
				cell.Invoke(func(g job.Group, db *database) error {
					return g.Add(job.OneShot("use-db", func(ctx context.Context, _ cell.Health) error {
						if !db.started {
							return errors.New("database not started")
						}
						record("job ran")
						<-ctx.Done()
						record("job stopped")
						return nil
					}, job.WithShutdown()))
				}),
			),
			cell.Module("db", "DB", cell.Provide(func(lc cell.Lifecycle) *database {
				db := &database{}
				lc.Append(cell.Hook{
					OnStart: func(context.Context) error { db.started = true; record("db started"); return nil },
					OnStop:  func(context.Context) error { record("db stopped"); return nil },
				})
				return db
			})),
		)
		if err := h.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := h.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		want := []string{"db started", "job ran", "job stopped", "db stopped"}
		if !slices.Equal(events, want) {
			t.Fatalf("events %v, want %v", events, want)
		}
	})
}

func TestJobAddedWhileRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var group job.Group
		h := hivetest.Start(t, cell.Module("m", "M", cell.Invoke(func(g job.Group) { group = g })))
		var returned atomic.Bool
		if err := group.Add(job.OneShot("late", func(ctx context.Context, h cell.Health) error {
			h.OK("late job running")
			<-ctx.Done()
			returned.Store(true)
			return nil
		})); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		wantLevel(t, h, "m.late", health.LevelOK, "late job running")
		if err := h.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if !returned.Load() {
			t.Fatal("late job still running after Stop")
		}
		// Jobs added after the stop are dropped: the Add succeeds, no
		// goroutine starts (Wait would let it run), the job never runs.
		var ran atomic.Int32
		if err := group.Add(job.OneShot("too-late", func(context.Context, cell.Health) error {
			ran.Add(1)
			return nil
		})); err != nil {
			t.Fatalf("Add after stop = %v, want nil (dropped and logged)", err)
		}
		settle(time.Hour)
		if n := ran.Load(); n != 0 {
			t.Fatalf("job added after stop ran %d times", n)
		}
	})
}

func TestAddRefusesInvalidJobs(t *testing.T) {
	noop := func(context.Context, cell.Health) error { return nil }
	tests := []struct {
		name    string
		jobs    []job.Job
		wantMsg string // "" when valid
	}{
		{"valid names", []job.Job{job.OneShot("a", noop), job.OneShot("sync_routes-2", noop), job.OneShot(strings.Repeat("j", 64), noop)}, ""},
		{"upper case", []job.Job{job.OneShot("ok", noop), job.OneShot("Sync", noop)}, `job name "Sync" must match`},
		{"empty", []job.Job{job.OneShot("", noop)}, `job name "" must match`},
		{"dot", []job.Job{job.Timer("a.b", func(context.Context) error { return nil }, time.Second)}, `job name "a.b"`},
		{"too long", []job.Job{job.OneShot(strings.Repeat("j", 65), noop)}, "must match"},
		{"nil job", []job.Job{job.OneShot("ok", noop), nil}, "job 2 of 2 is nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var addErr error
			h := hive.NewWithOptions(hive.Options{Logger: quiet}, cell.Module("outer", "", cell.Module("m", "M",
				cell.Invoke(func(g job.Group) { addErr = g.Add(tt.jobs...) }))))
			startErr := h.Start(t.Context())
			defer h.Stop(context.Background())
			if tt.wantMsg == "" {
				if addErr != nil || startErr != nil {
					t.Fatalf("Add = %v, Start = %v, want nil", addErr, startErr)
				}
				return
			}
			// The error names the module and the job; ignoring it still
			// fails Start, which then runs none of the jobs.
			for _, err := range []error{addErr, startErr} {
				if !errors.Is(err, job.ErrInvalidJob) || !strings.Contains(err.Error(), "module outer.m: ") ||
					!strings.Contains(err.Error(), tt.wantMsg) {
					t.Errorf("error %v, want ErrInvalidJob naming module outer.m and %q", err, tt.wantMsg)
				}
			}
			if !errors.Is(startErr, hive.ErrStartFailed) {
				t.Errorf("Start = %v, want ErrStartFailed", startErr)
			}
		})
	}
}

func TestAddErrorFromInvokeFailsPopulate(t *testing.T) {
	h := hive.NewWithOptions(hive.Options{Logger: quiet}, cell.Module("m", "M", cell.Invoke(func(g job.Group) error {
		return g.Add(job.OneShot("Bad", func(context.Context, cell.Health) error { return nil }))
	})))
	err := h.Populate()
	if !errors.Is(err, cell.ErrInvoke) || !errors.Is(err, job.ErrInvalidJob) || !strings.Contains(err.Error(), `"Bad"`) {
		t.Fatalf("Populate = %v, want ErrInvoke wrapping ErrInvalidJob", err)
	}
}

func TestAddWhileRunningRefusesInvalidJobs(t *testing.T) {
	var group job.Group
	hivetest.Start(t, cell.Module("m", "M", cell.Invoke(func(g job.Group) { group = g })))
	err := group.Add(job.OneShot("Bad", func(context.Context, cell.Health) error { return nil }))
	if !errors.Is(err, job.ErrInvalidJob) || !strings.Contains(err.Error(), "module m: ") {
		t.Fatalf("Add = %v, want ErrInvalidJob naming module m", err)
	}
	// The hive keeps running and stops cleanly (hivetest checks the stop).
}

// A job that ignores its context past the stop deadline is abandoned:
// Stop returns at the deadline naming it, its health scope is gone, its
// later reports are dropped, and its goroutine runs on until it returns.
func TestStuckJobAbandoned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		reported := make(chan struct{})
		var returned atomic.Bool
		h := hive.NewWithOptions(hive.Options{Logger: quiet, StopTimeout: time.Second},
			cell.Module("m", "M", cell.Invoke(func(g job.Group) error {
				return g.Add(
					job.OneShot("stuck", func(_ context.Context, h cell.Health) error {
						h.OK("ignoring my context")
						<-release
						h.Degraded("too late", nil) // dropped: the scope is closed
						close(reported)
						<-release
						returned.Store(true)
						return nil
					}),
					job.OneShot("polite", func(ctx context.Context, _ cell.Health) error {
						<-ctx.Done()
						return nil
					}),
				)
			})))
		if err := h.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		t0 := time.Now()
		err := h.Stop(context.Background())
		if d := time.Since(t0); d != time.Second {
			t.Errorf("Stop took %v, want the stop timeout (1s)", d)
		}
		if !errors.Is(err, job.ErrJobsNotStopped) || !errors.Is(err, hive.ErrStopTimeout) ||
			!errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "module m: hook jobs stuck, polite") {
			t.Fatalf("Stop = %v, want ErrStopTimeout wrapping ErrJobsNotStopped from module m's job hook", err)
		}
		if !strings.Contains(err.Error(), "did not stop in time: stuck: ") {
			t.Errorf("Stop = %v, want only the stuck job named", err)
		}
		if returned.Load() {
			t.Fatal("the stuck job returned; it should still run")
		}
		if _, ok := scope(h, "m.stuck"); ok {
			t.Fatal("the abandoned job's health scope is still in the tree")
		}
		release <- struct{}{}
		<-reported
		if _, ok := scope(h, "m.stuck"); ok {
			t.Fatal("the abandoned job's late report reopened its scope")
		}
		close(release)
		synctest.Wait()
		if !returned.Load() {
			t.Fatal("the released job did not return")
		}
	})
}
