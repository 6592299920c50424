package hivetest_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spf13/pflag"

	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/hivetest"
	"github.com/steadystate/steadystate/hive/job"
)

// fakeT records what hivetest reports, so that failures can be tested.
type fakeT struct {
	ctx      context.Context
	cleanups []func()

	mu    sync.Mutex // guards the fields below, written by the hive's goroutines
	out   bytes.Buffer
	errs  []string
	fatal string
}

func (f *fakeT) Helper()                  {}
func (f *fakeT) Name() string             { return "fake" }
func (f *fakeT) Context() context.Context { return f.ctx }
func (f *fakeT) Cleanup(fn func())        { f.cleanups = append(f.cleanups, fn) }
func (f *fakeT) Output() io.Writer        { return writerFunc(f.write) }

func (f *fakeT) write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.out.Write(p)
}

func (f *fakeT) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.fatal = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fakeT) output() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.out.String()
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }

// runFake calls body as the testing package calls a test: in a goroutine
// of its own, which Fatalf ends, followed by the cleanups in reverse order.
func runFake(ctx context.Context, body func(t hivetest.TB)) *fakeT {
	f := &fakeT{ctx: ctx}
	done := make(chan struct{})
	go func() {
		defer close(done)
		body(f)
	}()
	<-done
	for _, fn := range slices.Backward(f.cleanups) {
		fn()
	}
	return f
}

// events records hook calls.
type events struct {
	mu  sync.Mutex
	log []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.log = append(e.log, s)
}

func (e *events) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.log, ",")
}

// hooked is a module whose hook records into e and fails as told.
func hooked(e *events, startErr, stopErr error) cell.Cell {
	return cell.Module("m", "M", cell.Invoke(func(lc cell.Lifecycle, log *slog.Logger) {
		lc.Append(cell.Hook{
			OnStart: func(context.Context) error { e.add("start"); return startErr },
			OnStop:  func(context.Context) error { e.add("stop"); log.Info("stopping m"); return stopErr },
		})
	}))
}

func TestStartStopsAtCleanup(t *testing.T) {
	var e events
	t.Run("test", func(t *testing.T) {
		hivetest.Start(t, hooked(&e, nil, nil))
		if e.String() != "start" {
			t.Fatalf("events %q while the test runs, want start", e.String())
		}
	})
	if e.String() != "start,stop" {
		t.Fatalf("events %q after the test, want start,stop", e.String())
	}
}

func TestStopWaitsForJobs(t *testing.T) {
	var returned atomic.Bool
	t.Run("test", func(t *testing.T) {
		hivetest.Start(t, cell.Module("m", "M", cell.Invoke(func(g job.Group) error {
			return g.Add(job.OneShot("wait", func(ctx context.Context, _ cell.Health) error {
				<-ctx.Done()
				returned.Store(true)
				return nil
			}))
		})))
	})
	if !returned.Load() {
		t.Fatal("the job was still running after the test's cleanup")
	}
}

type levelConfig struct{ Level int }

func (def levelConfig) Flags(fs *pflag.FlagSet) { fs.Int("level", def.Level, "how much") }

func TestFlags(t *testing.T) {
	var got levelConfig
	hivetest.StartWithOptions(t, hivetest.Options{Flags: []string{"--level=7"}},
		cell.Config(levelConfig{Level: 1}), cell.Invoke(func(c levelConfig) { got = c }))
	if got.Level != 7 {
		t.Fatalf("Level = %d, want 7", got.Level)
	}
}

func TestFailuresAreReported(t *testing.T) {
	boom := fmt.Errorf("boom")
	tests := []struct {
		name      string
		opts      hivetest.Options
		cell      func(e *events) cell.Cell
		wantFatal string // prefix; "" for none
		wantErr   string // prefix; "" for none
		wantHooks string
	}{
		{
			name:      "start fails: fatal, nothing left running",
			cell:      func(e *events) cell.Cell { return hooked(e, boom, nil) },
			wantFatal: "hivetest: starting the hive: start failed: module m: hook ",
			wantHooks: "start",
		},
		{
			name:      "bad flag: fatal before starting",
			opts:      hivetest.Options{Flags: []string{"--level=high"}},
			cell:      func(e *events) cell.Cell { return cell.Group(cell.Config(levelConfig{}), hooked(e, nil, nil)) },
			wantFatal: `hivetest: flags ["--level=high"]: `,
		},
		{
			name:      "stop fails: an error at cleanup",
			cell:      func(e *events) cell.Cell { return hooked(e, nil, boom) },
			wantErr:   "hivetest: stopping the hive: stop failed: module m: hook ",
			wantHooks: "start,stop",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e events
			f := runFake(t.Context(), func(ft hivetest.TB) {
				hivetest.StartWithOptions(ft, tt.opts, tt.cell(&e))
			})
			if !strings.HasPrefix(f.fatal, tt.wantFatal) || (tt.wantFatal == "") != (f.fatal == "") {
				t.Errorf("fatal %q, want %q", f.fatal, tt.wantFatal)
			}
			if got := strings.Join(f.errs, "\n"); !strings.HasPrefix(got, tt.wantErr) || (tt.wantErr == "") != (got == "") {
				t.Errorf("errors %q, want %q", got, tt.wantErr)
			}
			if e.String() != tt.wantHooks {
				t.Errorf("hooks %q, want %q", e.String(), tt.wantHooks)
			}
		})
	}
}

func TestLogs(t *testing.T) {
	tests := []struct {
		name    string
		level   slog.Level
		want    []string
		wantNot []string
	}{
		{"default level is Info", 0, []string{"level=INFO msg=Starting", `msg="stopping m" module=m`}, []string{"DEBUG"}},
		{"debug", slog.LevelDebug, []string{`level=DEBUG msg="Started hook"`}, nil},
		{"warn", slog.LevelWarn, nil, []string{"INFO"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e events
			var log *slog.Logger
			f := runFake(t.Context(), func(ft hivetest.TB) {
				hivetest.StartWithOptions(ft, hivetest.Options{LogLevel: tt.level},
					hooked(&e, nil, nil), cell.Invoke(func(l *slog.Logger) { log = l }))
			})
			out := f.output()
			for _, s := range tt.want {
				if !strings.Contains(out, s) {
					t.Errorf("output lacks %q:\n%s", s, out)
				}
			}
			for _, s := range tt.wantNot {
				if strings.Contains(out, s) {
					t.Errorf("output has %q:\n%s", s, out)
				}
			}
			// After the cleanups the test's output is closed to the hive.
			log.Error("after the test")
			if strings.Contains(f.output(), "after the test") {
				t.Error("a log after the cleanups reached the test output")
			}
		})
	}
}

// Zero timeouts mean the hive's defaults; set ones bound Start and Stop. A
// stuck job is reported when the stop timeout passes.
func TestTimeouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var startIn, stopIn time.Duration
		until := func(ctx context.Context, d *time.Duration) error {
			deadline, _ := ctx.Deadline()
			*d = time.Until(deadline)
			return nil
		}
		deadlines := cell.Invoke(func(lc cell.Lifecycle) {
			lc.Append(cell.Hook{
				OnStart: func(ctx context.Context) error { return until(ctx, &startIn) },
				OnStop:  func(ctx context.Context) error { return until(ctx, &stopIn) },
			})
		})
		runFake(t.Context(), func(ft hivetest.TB) { hivetest.Start(ft, deadlines) })
		if startIn != hive.DefaultStartTimeout || stopIn != hive.DefaultStopTimeout {
			t.Errorf("default deadlines %v, %v; want %v, %v", startIn, stopIn, hive.DefaultStartTimeout, hive.DefaultStopTimeout)
		}
		opts := hivetest.Options{StartTimeout: time.Second, StopTimeout: 2 * time.Second}
		runFake(t.Context(), func(ft hivetest.TB) { hivetest.StartWithOptions(ft, opts, deadlines) })
		if startIn != time.Second || stopIn != 2*time.Second {
			t.Errorf("deadlines %v, %v; want 1s, 2s", startIn, stopIn)
		}

		release := make(chan struct{})
		f := runFake(t.Context(), func(ft hivetest.TB) {
			hivetest.StartWithOptions(ft, opts, cell.Module("m", "M", cell.Invoke(func(g job.Group) error {
				return g.Add(job.OneShot("stuck", func(context.Context, cell.Health) error { <-release; return nil }))
			})))
		})
		if len(f.errs) != 1 || !strings.Contains(f.errs[0], "jobs did not stop in time: stuck") {
			t.Errorf("errors %q, want the stuck job named", f.errs)
		}
		close(release)
		synctest.Wait()
	})
}
