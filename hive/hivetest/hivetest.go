// Package hivetest runs a hive inside a test, in the manner of
// net/http/httptest: Start populates and starts it, failing the test if
// that fails, and stops it when the test ends. Logs go to the test's
// output, so they show next to the failure they explain.
//
// Shutdown is goleak-safe: the hive is stopped in a t.Cleanup, and Stop
// waits for every job goroutine to return (each job's context is
// cancelled first). When Stop returns without error no goroutine of the
// hive is left, so a goleak check in TestMain passes. A job that ignores
// its context past the stop timeout is abandoned (see package job): the
// test then fails with the error naming the job, and goleak names its
// goroutine.
//
// Start can run inside a testing/synctest bubble; the hive's timers and
// its jobs' goroutines then belong to the bubble.
package hivetest

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
)

// TB is what hivetest needs of a test. testing.TB has it, so pass the
// test's *testing.T (or *testing.B, *testing.F).
type TB interface {
	Helper()
	Name() string
	Context() context.Context
	Output() io.Writer
	Cleanup(func())
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Options adjust a test hive. The zero value gives the defaults.
type Options struct {
	// Flags are command-line arguments for the hive's config flags, e.g.
	// "--interval=1s". Default: none, every config keeps its defaults.
	Flags []string
	// LogLevel is the lowest level logged to the test output. Default:
	// slog.LevelInfo (the zero Level).
	LogLevel slog.Level
	// StartTimeout and StopTimeout bound Start and Stop. Default:
	// hive.DefaultStartTimeout and hive.DefaultStopTimeout.
	StartTimeout, StopTimeout time.Duration
}

// Start runs a hive of cells for the rest of the test, with default
// Options. See StartWithOptions.
func Start(t TB, cells ...cell.Cell) *hive.Hive {
	t.Helper()
	return StartWithOptions(t, Options{}, cells...)
}

// StartWithOptions populates and starts a hive of cells with the test's
// context, calling t.Fatal if a flag does not parse or the hive does not
// start, and registers a t.Cleanup that stops it (with a context of its
// own: the test's is cancelled by then) and reports a stop error with
// t.Error. The hive logs to t.Output until that cleanup is done.
func StartWithOptions(t TB, opts Options, cells ...cell.Cell) *hive.Hive {
	t.Helper()
	h := hive.NewWithOptions(hive.Options{
		Logger:       Logger(t, opts.LogLevel),
		StartTimeout: opts.StartTimeout,
		StopTimeout:  opts.StopTimeout,
	}, cells...)
	fs := pflag.NewFlagSet(t.Name(), pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	h.RegisterFlags(fs)
	if err := fs.Parse(opts.Flags); err != nil {
		t.Fatalf("hivetest: flags %q: %v", opts.Flags, err)
	}
	if err := h.Start(t.Context()); err != nil {
		t.Fatalf("hivetest: starting the hive: %v", err)
	}
	t.Cleanup(func() {
		if err := h.Stop(context.Background()); err != nil {
			t.Errorf("hivetest: stopping the hive: %v", err)
		}
	})
	return h
}

// Logger returns a logger that writes text records at level and above to
// t.Output, and drops them once the test's cleanups have run (a test's
// output must not be written after it ended).
func Logger(t TB, level slog.Level) *slog.Logger {
	w := &testWriter{out: t.Output()}
	t.Cleanup(w.close)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// testWriter forwards to a test's output until closed.
type testWriter struct {
	mu     sync.Mutex
	out    io.Writer
	closed bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return len(p), nil
	}
	return w.out.Write(p)
}

func (w *testWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
}
