package hive

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/internal/build"
)

// hookEntry is an appended hook with its names.
type hookEntry struct {
	hook   cell.HookInterface
	module string // dotted module path, "" at the root
	name   string // HookName or the function that appended the hook
}

// String is how errors and logs name the hook.
func (e hookEntry) String() string {
	if e.module == "" {
		return "hook " + e.name
	}
	return "module " + e.module + ": hook " + e.name
}

// lifecycle is the hive's cell.Lifecycle: an ordered list of hooks and how
// many of them (a prefix) are started.
type lifecycle struct {
	log *slog.Logger

	mu      sync.Mutex
	hooks   []hookEntry
	started int
}

// moduleLifecycle is the cell.Lifecycle a module gets.
type moduleLifecycle struct {
	lc     *lifecycle
	module string
}

// Append adds a hook named after the module and the calling function.
func (m moduleLifecycle) Append(h cell.HookInterface) {
	name := "unknown"
	if n, ok := h.(cell.HookNamer); ok {
		name = n.HookName()
	} else if pc, _, _, ok := runtime.Caller(1); ok {
		if f := runtime.FuncForPC(pc); f != nil {
			name = build.ShortFuncName(f.Name())
		}
	}
	m.lc.mu.Lock()
	defer m.lc.mu.Unlock()
	m.lc.hooks = append(m.lc.hooks, hookEntry{hook: h, module: m.module, name: name})
}

// start starts the hooks not yet started, in order. Hooks may append hooks
// while they start; those start too. On error the hooks started so far stay
// started (the caller rolls back with stop).
func (lc *lifecycle) start(ctx context.Context) error {
	for {
		lc.mu.Lock()
		if lc.started == len(lc.hooks) {
			lc.mu.Unlock()
			return nil
		}
		e := lc.hooks[lc.started]
		lc.mu.Unlock()

		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%w: before %s: %w", ErrStartTimeout, e, err)
		}
		t0 := time.Now()
		err := e.hook.Start(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%w: %s: %w", ErrStartTimeout, e, err)
			}
			return fmt.Errorf("%w: %s: %w", ErrStartFailed, e, err)
		}
		lc.log.Debug("Started hook", "hook", e.String(), "duration", time.Since(t0))

		lc.mu.Lock()
		lc.started++
		lc.mu.Unlock()
	}
}

// stop stops the started hooks in reverse order. It calls every one, even
// after errors or the deadline, and joins the errors.
func (lc *lifecycle) stop(ctx context.Context) error {
	var errs []error
	for {
		lc.mu.Lock()
		if lc.started == 0 {
			lc.mu.Unlock()
			return errors.Join(errs...)
		}
		lc.started--
		e := lc.hooks[lc.started]
		lc.mu.Unlock()

		t0 := time.Now()
		if err := e.hook.Stop(ctx); err != nil {
			sentinel := ErrStopFailed
			if ctx.Err() != nil {
				sentinel = ErrStopTimeout
			}
			errs = append(errs, fmt.Errorf("%w: %s: %w", sentinel, e, err))
			lc.log.Error("Stop hook failed", "hook", e.String(), "error", err)
			continue
		}
		lc.log.Debug("Stopped hook", "hook", e.String(), "duration", time.Since(t0))
	}
}

// hookNames returns the names of the hooks appended by each module (key:
// dotted module path, "" for the root).
func (lc *lifecycle) hookNames() map[string][]string {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	out := map[string][]string{}
	for _, e := range lc.hooks {
		out[e.module] = append(out[e.module], e.name)
	}
	return out
}
