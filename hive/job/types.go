package job

import (
	"context"
	"log/slog"

	"github.com/steadystate/steadystate/hive/cell"
)

// Job is one unit of background work: OneShot, Timer or Observer.
type Job interface {
	// Name identifies the job in health, logs and errors. It follows the
	// name rule of module ids ([a-z][a-z0-9_-]{0,63}); Group.Add checks it.
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
// module; NewGroup makes one without a hive.
type Group interface {
	// Add schedules jobs: before the hive starts they start with it (after
	// what was constructed before this call); while it runs they start now;
	// after the group stopped they are dropped (and logged). A nil job or a
	// name that breaks the name rule is an error wrapping ErrInvalidJob
	// that names the module and the job; then none of the jobs is added,
	// and if the hive has not started yet its Start fails with the same
	// error, so an Add whose error is ignored still stops the program from
	// running without its job.
	Add(jobs ...Job) error
}

// GroupConfig is what a Group needs. The hive fills it in for each module.
type GroupConfig struct {
	// Module is the full id of the module the group belongs to, for errors
	// (empty outside every module).
	Module cell.FullModuleID
	// Lifecycle starts and stops the jobs. Required.
	Lifecycle cell.Lifecycle
	// Health is the scope the jobs report under: each job gets a child
	// scope named after it. Required.
	Health cell.Health
	// Logger receives the jobs' failures. Default: discard.
	Logger *slog.Logger
	// Shutdowner stops the hive for jobs made WithShutdown. Default: none,
	// and such jobs only report their failure.
	Shutdowner cell.Shutdowner
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
