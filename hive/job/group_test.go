package job_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/job"
)

type database struct{ started bool }

func TestJobsStartAfterDependencies(t *testing.T) {
	var mu sync.Mutex
	var events []string
	record := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, s)
	}
	h := hive.NewWithOptions(quiet,
		cell.Module("app", "App",
			// The group is asked for before the database is constructed,
			// yet the job must start after the database's hook.
			cell.Invoke(func(g job.Group, db *database) {
				g.Add(job.OneShot("use-db", func(ctx context.Context, _ cell.Health) error {
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
	waitFor(t, "job to run", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(events) == 2
	})
	if err := h.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := []string{"db started", "job ran", "job stopped", "db stopped"}
	if !slices.Equal(events, want) {
		t.Fatalf("events %v, want %v", events, want)
	}
}

func TestJobAddedWhileRunning(t *testing.T) {
	var group job.Group
	h := hive.NewWithOptions(quiet, cell.Module("m", "M", cell.Invoke(func(g job.Group) { group = g })))
	if err := h.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	group.Add(job.OneShot("late", func(ctx context.Context, h cell.Health) error {
		h.OK("late job running")
		<-ctx.Done()
		close(stopped)
		return nil
	}))
	waitLevel(t, h, "m.late", cell.LevelOK, "late job running")
	if err := h.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stopped:
	default:
		t.Fatal("late job still running after Stop")
	}
	// Jobs added after the stop never run.
	group.Add(job.OneShot("too-late", func(context.Context, cell.Health) error {
		t.Error("job added after stop ran")
		return nil
	}))
	time.Sleep(10 * time.Millisecond)
}

func TestStuckJobReported(t *testing.T) {
	release := make(chan struct{})
	h := hive.NewWithOptions(hive.Options{Logger: quiet.Logger, StopTimeout: 20 * time.Millisecond},
		cell.Module("m", "M", cell.Invoke(func(g job.Group) {
			g.Add(job.OneShot("stuck", func(context.Context, cell.Health) error {
				<-release // ignores its context
				return nil
			}))
		})))
	if err := h.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	err := h.Stop(t.Context())
	close(release)
	if !errors.Is(err, job.ErrJobsNotStopped) || !errors.Is(err, hive.ErrStopTimeout) {
		t.Fatalf("Stop = %v, want ErrJobsNotStopped", err)
	}
	time.Sleep(10 * time.Millisecond) // let the released job return before goleak looks
}
