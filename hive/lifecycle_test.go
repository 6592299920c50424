package hive_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
)

// recorder logs hook calls in order.
type recorder struct {
	mu  sync.Mutex
	log []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, s)
}

func (r *recorder) events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

// hookSpec says how a test hook behaves.
type hookSpec struct {
	startErr, stopErr     error
	blockStart, blockStop bool // wait for ctx to be done, then return its error
}

func (s hookSpec) hook(r *recorder, name string) cell.Hook {
	return cell.Hook{
		OnStart: func(ctx context.Context) error {
			r.add("start " + name)
			if s.blockStart {
				<-ctx.Done()
				return ctx.Err()
			}
			return s.startErr
		},
		OnStop: func(ctx context.Context) error {
			r.add("stop " + name)
			if s.blockStop {
				<-ctx.Done()
				return ctx.Err()
			}
			return s.stopErr
		},
	}
}

// Types for a dependency chain c → b → a (c needs b needs a).
type (
	depA struct{}
	depB struct{}
	depC struct{}
)

// chain builds modules a, b, c whose constructors depend on each other and
// append hooks behaving as specs says. The cells are listed in reverse
// dependency order so that only the dependencies decide the order.
func chain(r *recorder, specs map[string]hookSpec) []cell.Cell {
	return []cell.Cell{
		cell.Module("c", "C",
			cell.Provide(func(lc cell.Lifecycle, _ *depB) *depC {
				lc.Append(specs["c"].hook(r, "c"))
				return &depC{}
			}),
			cell.Invoke(func(*depC) {}),
		),
		cell.Module("b", "B", cell.Provide(func(lc cell.Lifecycle, _ *depA) *depB {
			lc.Append(specs["b"].hook(r, "b"))
			return &depB{}
		})),
		cell.Module("a", "A", cell.Provide(func(lc cell.Lifecycle) *depA {
			lc.Append(specs["a"].hook(r, "a"))
			return &depA{}
		})),
	}
}

func TestStartStopOrder(t *testing.T) {
	var r recorder
	h := newHive(chain(&r, nil)...)
	if err := h.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := h.Stop(t.Context()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	want := []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}
	if got := r.events(); !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	if err := h.Start(t.Context()); !errors.Is(err, hive.ErrAlreadyStarted) {
		t.Fatalf("second Start = %v, want ErrAlreadyStarted", err)
	}
	if err := h.Stop(t.Context()); err != nil {
		t.Fatalf("second Stop = %v, want nil", err)
	}
}

func TestStartFailures(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name      string
		specs     map[string]hookSpec
		opts      hive.Options
		wantErrs  []error
		wantInMsg []string
		want      []string
	}{
		{
			name:      "failed start rolls back in reverse",
			specs:     map[string]hookSpec{"c": {startErr: boom}},
			wantErrs:  []error{hive.ErrStartFailed, boom},
			wantInMsg: []string{"module c: hook hive_test.chain.func1", "boom"},
			want:      []string{"start a", "start b", "start c", "stop b", "stop a"},
		},
		{
			name:      "first hook fails: nothing to stop",
			specs:     map[string]hookSpec{"a": {startErr: boom}},
			wantErrs:  []error{hive.ErrStartFailed},
			wantInMsg: []string{"module a: hook"},
			want:      []string{"start a"},
		},
		{
			name:      "rollback errors are joined",
			specs:     map[string]hookSpec{"c": {startErr: boom}, "a": {stopErr: errors.New("stuck")}},
			wantErrs:  []error{hive.ErrStartFailed, hive.ErrStopFailed},
			wantInMsg: []string{"module a: hook", "stuck"},
			want:      []string{"start a", "start b", "start c", "stop b", "stop a"},
		},
		{
			name:      "start timeout",
			specs:     map[string]hookSpec{"b": {blockStart: true}},
			opts:      hive.Options{StartTimeout: 20 * time.Millisecond},
			wantErrs:  []error{hive.ErrStartTimeout, context.DeadlineExceeded},
			wantInMsg: []string{"module b: hook"},
			want:      []string{"start a", "start b", "stop a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r recorder
			opts := tt.opts
			opts.Logger = quiet.Logger
			h := hive.NewWithOptions(opts, chain(&r, tt.specs)...)
			err := h.Start(t.Context())
			if err == nil {
				t.Fatal("Start succeeded, want error")
			}
			for _, want := range tt.wantErrs {
				if !errors.Is(err, want) {
					t.Errorf("error %q is not %v", err, want)
				}
			}
			for _, s := range tt.wantInMsg {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if got := r.events(); !slices.Equal(got, tt.want) {
				t.Errorf("events = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStopTimeoutStillStopsEveryHook(t *testing.T) {
	var r recorder
	h := hive.NewWithOptions(hive.Options{Logger: quiet.Logger, StopTimeout: 20 * time.Millisecond},
		chain(&r, map[string]hookSpec{"c": {blockStop: true}})...)
	if err := h.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	err := h.Stop(t.Context())
	if !errors.Is(err, hive.ErrStopTimeout) || !strings.Contains(err.Error(), "module c: hook") {
		t.Fatalf("Stop = %v, want ErrStopTimeout naming module c", err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("Stop took %v", d)
	}
	want := []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}
	if got := r.events(); !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
}

// Stop never populates: stopping a hive that was not started does nothing.
func TestStopNeverPopulates(t *testing.T) {
	var invoked bool
	h := newHive(cell.Invoke(func() { invoked = true }))
	if err := h.Stop(t.Context()); err != nil || invoked {
		t.Fatalf("Stop = %v, invoked %v; want nil and no Populate", err, invoked)
	}
}

func TestHookNames(t *testing.T) {
	named := namedHook{}
	h := newHive(cell.Module("m", "M", cell.Invoke(func(lc cell.Lifecycle) {
		lc.Append(named)
		lc.Append(cell.Hook{})
	})), cell.Invoke(func(lc cell.Lifecycle) { lc.Append(cell.Hook{}) }))
	if err := h.Populate(); err != nil {
		t.Fatal(err)
	}
	hooks := hookNames(t, h)
	want := []string{"my hook", "hive_test.TestHookNames.func1", "hive_test.TestHookNames.func2"}
	if !slices.Equal(hooks, want) {
		t.Fatalf("hooks = %v, want %v", hooks, want)
	}
}

type namedHook struct{ cell.Hook }

func (namedHook) HookName() string { return "my hook" }

// A zero Options gives the documented defaults: hooks see their deadlines
// exactly DefaultStartTimeout and DefaultStopTimeout away (on a bubble's
// clock), and the hive logs to slog.Default().
func TestOptionDefaults(t *testing.T) {
	if hive.DefaultStartTimeout != 5*time.Minute || hive.DefaultStopTimeout != time.Minute {
		t.Fatalf("defaults changed: start %v stop %v; update the docs", hive.DefaultStartTimeout, hive.DefaultStopTimeout)
	}
	var logs bytes.Buffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	synctest.Test(t, func(t *testing.T) {
		var startIn, stopIn time.Duration
		untilDeadline := func(ctx context.Context, d *time.Duration) error {
			deadline, ok := ctx.Deadline()
			if !ok {
				return fmt.Errorf("no deadline")
			}
			*d = time.Until(deadline)
			return nil
		}
		h := hive.New(cell.Invoke(func(lc cell.Lifecycle) {
			lc.Append(cell.Hook{
				OnStart: func(ctx context.Context) error { return untilDeadline(ctx, &startIn) },
				OnStop:  func(ctx context.Context) error { return untilDeadline(ctx, &stopIn) },
			})
		}))
		if err := h.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := h.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if startIn != hive.DefaultStartTimeout || stopIn != hive.DefaultStopTimeout {
			t.Fatalf("deadlines in %v and %v, want %v and %v", startIn, stopIn, hive.DefaultStartTimeout, hive.DefaultStopTimeout)
		}
	})
	if !strings.Contains(logs.String(), "msg=Starting") {
		t.Fatalf("default logger got %q, want the hive's logs", logs.String())
	}
}
