package job_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/health"
	"github.com/steadystate/steadystate/hive/job"
)

func TestOneShotRetry(t *testing.T) {
	fail := errors.New("fail")
	tests := []struct {
		name      string
		failures  int // the function fails this many times, then succeeds
		opts      []job.OneShotOption
		wantCalls int32
		wantLevel cell.Level
		wantMsg   string
	}{
		{"success", 0, nil, 1, cell.LevelStopped, "done"},
		{"no retry by default", 1, nil, 1, cell.LevelDegraded, "failed"},
		{"retried until success", 2, []job.OneShotOption{job.WithRetry(3, time.Millisecond, 4*time.Millisecond)}, 3, cell.LevelStopped, "done"},
		{"retries exhausted", 10, []job.OneShotOption{job.WithRetry(2, time.Millisecond, time.Millisecond)}, 3, cell.LevelDegraded, "failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			h := startJobs(t, job.OneShot("once", func(context.Context, cell.Health) error {
				if calls.Add(1) <= int32(tt.failures) {
					return fail
				}
				return nil
			}, tt.opts...))
			st := waitLevel(t, h, "m.once", tt.wantLevel, tt.wantMsg)
			if tt.wantLevel == cell.LevelDegraded && st.Error != "fail" {
				t.Errorf("error = %q, want fail", st.Error)
			}
			time.Sleep(10 * time.Millisecond) // no further attempts may follow
			if got := calls.Load(); got != tt.wantCalls {
				t.Fatalf("calls = %d, want %d", got, tt.wantCalls)
			}
		})
	}
}

func TestOneShotRetryBackoff(t *testing.T) {
	var times []time.Time
	h := startJobs(t, job.OneShot("backoff", func(context.Context, cell.Health) error {
		times = append(times, time.Now())
		return errors.New("fail")
	}, job.WithRetry(3, 20*time.Millisecond, 40*time.Millisecond)))
	waitLevel(t, h, "m.backoff", cell.LevelDegraded, "failed")
	// Waits: 20ms, 40ms, 40ms (doubled, capped).
	want := []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 40 * time.Millisecond}
	if len(times) != 4 {
		t.Fatalf("%d attempts, want 4", len(times))
	}
	for i, w := range want {
		if d := times[i+1].Sub(times[i]); d < w {
			t.Errorf("wait %d was %v, want at least %v", i, d, w)
		}
	}
}

func TestOneShotShutdown(t *testing.T) {
	h := hive.NewWithOptions(quiet, cell.Module("m", "M", cell.Invoke(func(g job.Group) {
		g.Add(job.OneShot("critical", func(context.Context, cell.Health) error {
			return errors.New("disk gone")
		}, job.WithRetry(1, time.Millisecond, time.Millisecond), job.WithShutdown()))
	})))
	done := make(chan error, 1)
	go func() { done <- h.Run() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "job critical: disk gone") {
			t.Fatalf("Run = %v, want the job's error", err)
		}
	case <-time.After(10 * time.Second):
		h.Shutdown()
		<-done
		t.Fatal("hive did not shut down")
	}
}

// hooks is a minimal cell.Lifecycle for using a Registry without a hive.
type hooks []cell.HookInterface

func (h *hooks) Append(hook cell.HookInterface) { *h = append(*h, hook) }

// shutdowns records shutdown requests.
type shutdowns struct{ n atomic.Int32 }

func (s *shutdowns) Shutdown(...cell.ShutdownOption) { s.n.Add(1) }

func TestOneShotStoppedWithGroup(t *testing.T) {
	var lc hooks
	var sd shutdowns
	tree := health.NewTree()
	g := job.NewRegistry(nil, &sd).NewGroup(tree.Root(), &lc)
	started := make(chan struct{})
	var sawCancel atomic.Bool
	g.Add(job.OneShot("blocker", func(ctx context.Context, _ cell.Health) error {
		close(started)
		<-ctx.Done()
		sawCancel.Store(true)
		return ctx.Err()
	}, job.WithShutdown()))
	for _, h := range lc {
		if err := h.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	<-started
	if st, ok := find(tree.Snapshot(), "blocker"); !ok || st.Level != cell.LevelOK {
		t.Fatalf("job scope %+v while running", st)
	}
	for _, h := range slices.Backward(lc) {
		if err := h.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if !sawCancel.Load() {
		t.Fatal("Stop returned before the job returned")
	}
	if n := sd.n.Load(); n != 0 {
		t.Fatalf("%d shutdown requests; a failure caused by stopping must not request one", n)
	}
	if _, ok := find(tree.Snapshot(), "blocker"); ok {
		t.Fatal("job health scope still present after stop")
	}
}
