package job_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/health"
	"github.com/steadystate/steadystate/hive/job"
	"github.com/steadystate/steadystate/internal/backoff"
)

func TestOneShotRetry(t *testing.T) {
	fail := errors.New("fail")
	tests := []struct {
		name      string
		failures  int // the function fails this many times, then succeeds
		opts      []job.OneShotOption
		wantCalls int32
		wantLevel health.Level
		wantMsg   string
	}{
		{"success", 0, nil, 1, health.LevelStopped, "done"},
		{"no retry by default", 1, nil, 1, health.LevelDegraded, "failed"},
		{"retried until success", 2, []job.OneShotOption{job.WithRetry(3, time.Millisecond, 4*time.Millisecond)}, 3, health.LevelStopped, "done"},
		{"retries exhausted", 10, []job.OneShotOption{job.WithRetry(2, time.Millisecond, time.Millisecond)}, 3, health.LevelDegraded, "failed"},
		{"retries without limit", 20, []job.OneShotOption{job.WithRetry(-1, time.Millisecond, time.Millisecond)}, 21, health.LevelStopped, "done"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var calls atomic.Int32
				h := startJobs(t, job.OneShot("once", func(context.Context, cell.Health) error {
					if calls.Add(1) <= int32(tt.failures) {
						return fail
					}
					return nil
				}, tt.opts...))
				// An hour on the bubble's clock is far beyond every backoff
				// here; after it every goroutine is blocked, so the count is
				// final: no further attempt is pending.
				settle(time.Hour)
				st := wantLevel(t, h, "m.once", tt.wantLevel, tt.wantMsg)
				if tt.wantLevel == health.LevelDegraded && st.Error != "fail" {
					t.Errorf("error = %q, want fail", st.Error)
				}
				if got := calls.Load(); got != tt.wantCalls {
					t.Fatalf("calls = %d, want %d", got, tt.wantCalls)
				}
			})
		})
	}
}

// The waits between attempts follow the shared backoff: doubling from the
// minimum, capped at the maximum, with at most a quarter of jitter within
// the cap. Zero backoffs mean the documented defaults.
func TestOneShotRetryBackoff(t *testing.T) {
	tests := []struct {
		name     string
		min, max time.Duration
		base     []time.Duration // the un-jittered waits
		maxWait  time.Duration   // the cap
	}{
		{"doubled and capped", 20 * time.Millisecond, 40 * time.Millisecond,
			[]time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 40 * time.Millisecond}, 40 * time.Millisecond},
		{"defaults", 0, 0,
			[]time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var times []time.Time
				h := startJobs(t, job.OneShot("backoff", func(context.Context, cell.Health) error {
					times = append(times, time.Now())
					return errors.New("fail")
				}, job.WithRetry(len(tt.base), tt.min, tt.max)))
				settle(time.Hour)
				wantLevel(t, h, "m.backoff", health.LevelDegraded, "failed")
				if len(times) != len(tt.base)+1 {
					t.Fatalf("%d attempts, want %d", len(times), len(tt.base)+1)
				}
				for i, base := range tt.base {
					hi := min(base+base/4, tt.maxWait)
					if d := times[i+1].Sub(times[i]); d < base || d > hi {
						t.Errorf("wait %d was %v, want %v..%v", i+1, d, base, hi)
					}
				}
			})
		})
	}
}

func TestRetryDefaults(t *testing.T) {
	if job.DefaultRetryBackoffMin != 100*time.Millisecond || job.DefaultRetryBackoffMax != time.Minute {
		t.Fatalf("defaults %v..%v, want 100ms..1m (update the docs)", job.DefaultRetryBackoffMin, job.DefaultRetryBackoffMax)
	}
	// They are the shared backoff's, which the reconciler uses too.
	if b := (backoff.Backoff{}).WithDefaults(); b.Min != job.DefaultRetryBackoffMin || b.Max != job.DefaultRetryBackoffMax {
		t.Fatalf("shared backoff defaults %+v differ", b)
	}
}

func TestOneShotShutdown(t *testing.T) {
	// Run waits for signals, so this hive runs outside a bubble.
	h := hive.NewWithOptions(hive.Options{Logger: quiet}, cell.Module("m", "M", cell.Invoke(func(g job.Group) error {
		return g.Add(job.OneShot("critical", func(context.Context, cell.Health) error {
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

// hooks is a minimal cell.Lifecycle for a Group without a hive.
type hooks []cell.HookInterface

func (h *hooks) Append(hook cell.HookInterface) { *h = append(*h, hook) }

// shutdowns records shutdown requests.
type shutdowns struct{ n atomic.Int32 }

func (s *shutdowns) Shutdown(...cell.ShutdownOption) { s.n.Add(1) }

func TestOneShotStoppedWithGroup(t *testing.T) {
	var lc hooks
	var sd shutdowns
	tree := health.NewTree()
	g := job.NewGroup(job.GroupConfig{Lifecycle: &lc, Health: tree.Root(), Shutdowner: &sd})
	started := make(chan struct{})
	var sawCancel atomic.Bool
	if err := g.Add(job.OneShot("blocker", func(ctx context.Context, _ cell.Health) error {
		close(started)
		<-ctx.Done()
		sawCancel.Store(true)
		return ctx.Err()
	}, job.WithShutdown())); err != nil {
		t.Fatal(err)
	}
	for _, h := range lc {
		if err := h.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	<-started
	if st, ok := find(tree.Snapshot(), "blocker"); !ok || st.Level != health.LevelOK {
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
