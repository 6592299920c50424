package job

import (
	"context"
	"errors"
)

// observer runs a function for each value of a source.
type observer[T any] struct {
	name string
	fn   func(ctx context.Context, event T) error
	src  Observable[T]
}

// Observer is a job that calls fn for each value from src, in order, in the
// goroutine that delivers it. An error from fn marks the job Degraded (the
// next success marks it OK again) and does not stop the observation. When
// src completes the job is Stopped, or Degraded if src failed. The job
// waits for src to call complete before it returns.
func Observer[T any](name string, fn func(ctx context.Context, event T) error, src Observable[T]) Job {
	return &observer[T]{name: name, fn: fn, src: src}
}

// Name implements Job.
func (o *observer[T]) Name() string { return o.name }

func (o *observer[T]) run(ctx context.Context, env env) {
	done := make(chan error, 1)
	env.health.OK("observing")
	next := func(v T) {
		if err := safely(env.log, o.name, func() error { return o.fn(ctx, v) }); err != nil {
			if ctx.Err() == nil {
				env.health.Degraded("handling a value failed", err)
				env.log.Warn("Observer job failed to handle a value", "job", o.name, "error", err)
			}
			return
		}
		env.health.OK("observing")
	}
	complete := func(err error) {
		select { // a second call is a bug in the source; do not block it
		case done <- err:
		default:
		}
	}
	o.src.Observe(ctx, next, complete)
	err := <-done
	switch {
	case ctx.Err() != nil && (err == nil || errors.Is(err, ctx.Err())):
		// stopped with the hive
	case err != nil:
		env.health.Degraded("source failed", err)
		env.log.Error("Observer job source failed", "job", o.name, "error", err)
	default:
		env.health.Stopped("source completed")
	}
}
