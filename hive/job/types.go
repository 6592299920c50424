package job

import (
	"context"
	"log/slog"

	"github.com/steadystate/steadystate/hive/cell"
)

// Job is one unit of background work: OneShot, Timer or Observer.
type Job interface {
	// Name identifies the job in health, logs and errors.
	Name() string

	// run does the work until it is done or ctx is cancelled.
	run(ctx context.Context, env env)
}

// env is what a running job gets from its group.
type env struct {
	health     cell.Health
	log        *slog.Logger
	shutdowner cell.Shutdowner
}

// Group runs jobs with the lifecycle of a module. The hive provides one per
// module.
type Group interface {
	// Add schedules jobs: before the hive starts they start with it (after
	// what was constructed before this call); while it runs they start now.
	Add(jobs ...Job)
}

// Registry makes groups.
type Registry interface {
	// NewGroup returns a group whose jobs report under health and start and
	// stop through lc. Call it while the hive is being constructed.
	NewGroup(health cell.Health, lc cell.Lifecycle, opts ...GroupOption) Group
}

// GroupOption adjusts a group.
type GroupOption func(*groupOptions)

type groupOptions struct {
	log *slog.Logger
}

// WithLogger sets the logger of the group's jobs (default: the registry's).
func WithLogger(log *slog.Logger) GroupOption {
	return func(o *groupOptions) { o.log = log }
}

// Observable is a source of values of type T.
//
// Observe delivers values to next, one at a time, then calls complete
// exactly once: with nil when the source is exhausted, with an error when
// it failed, or with ctx.Err() after ctx is cancelled (which it must notice
// promptly). It may do this in the calling goroutine (blocking) or in its
// own goroutine; next is never called after complete.
type Observable[T any] interface {
	Observe(ctx context.Context, next func(T), complete func(error))
}

// ObserveFunc adapts a function to Observable.
type ObserveFunc[T any] func(ctx context.Context, next func(T), complete func(error))

// Observe calls f.
func (f ObserveFunc[T]) Observe(ctx context.Context, next func(T), complete func(error)) {
	f(ctx, next, complete)
}

// FromChannel is an Observable of the values received from ch; it completes
// when ch is closed. It delivers in the calling goroutine.
func FromChannel[T any](ch <-chan T) Observable[T] {
	return ObserveFunc[T](func(ctx context.Context, next func(T), complete func(error)) {
		for {
			select {
			case <-ctx.Done():
				complete(ctx.Err())
				return
			case v, ok := <-ch:
				if !ok {
					complete(nil)
					return
				}
				next(v)
			}
		}
	})
}
