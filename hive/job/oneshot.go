package job

import (
	"context"
	"fmt"
	"time"

	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/internal/backoff"
)

// Defaults for WithRetry's zero backoffs, 100ms and 1m: the project's one
// retry backoff, the same as the reconciler's (reconciler.DefaultRetryBackoffMin
// and DefaultRetryBackoffMax).
const (
	DefaultRetryBackoffMin = backoff.DefaultMin
	DefaultRetryBackoffMax = backoff.DefaultMax
)

// oneShot runs a function once, retrying on failure.
type oneShot struct {
	name     string
	fn       func(ctx context.Context, health cell.Health) error
	retries  int
	backoff  backoff.Backoff
	shutdown bool
}

// OneShotOption adjusts a OneShot job.
type OneShotOption func(*oneShot)

// WithRetry retries a failed run up to times more times (a negative times:
// without limit). The wait before retry n is minBackoff·2^(n-1), capped at
// maxBackoff, plus up to a quarter of jitter within the cap. Zero backoffs
// mean DefaultRetryBackoffMin and DefaultRetryBackoffMax; a maxBackoff
// below minBackoff is raised to it.
func WithRetry(times int, minBackoff, maxBackoff time.Duration) OneShotOption {
	return func(o *oneShot) {
		o.retries = times
		o.backoff = backoff.Backoff{Min: minBackoff, Max: maxBackoff}.WithDefaults()
	}
}

// WithShutdown shuts the hive down, with the job's error, when the job
// fails for the last time. A failure caused by the hive stopping does not
// count.
func WithShutdown() OneShotOption {
	return func(o *oneShot) { o.shutdown = true }
}

// OneShot is a job that runs fn once in its own goroutine. fn gets the
// job's health scope, which reads OK "running" while fn runs, Stopped
// "done" after it returned nil and Degraded after a failure. By default a
// failure is final; see WithRetry and WithShutdown. fn must return when ctx
// is cancelled; a fn that does not is abandoned at the stop deadline (see
// ErrJobsNotStopped).
func OneShot(name string, fn func(ctx context.Context, health cell.Health) error, opts ...OneShotOption) Job {
	o := &oneShot{name: name, fn: fn}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

// Name implements Job.
func (o *oneShot) Name() string { return o.name }

func (o *oneShot) run(ctx context.Context, env env) {
	for attempt := 1; ; attempt++ {
		env.health.OK("running")
		err := safely(env.log, o.name, func() error { return o.fn(ctx, env.health) })
		if err == nil {
			env.health.Stopped("done")
			return
		}
		if ctx.Err() != nil {
			return // stopped with the hive; not a failure
		}
		if o.retries >= 0 && attempt > o.retries {
			env.health.Degraded("failed", err)
			env.log.Error("One-shot job failed", "job", o.name, "attempts", attempt, "error", err)
			if o.shutdown && env.shutdowner != nil {
				env.shutdowner.Shutdown(cell.ShutdownWithError(fmt.Errorf("job %s: %w", o.name, err)))
			}
			return
		}
		wait := o.backoff.Duration(attempt)
		env.health.Degraded(fmt.Sprintf("failed, retrying in %s", wait), err)
		env.log.Warn("One-shot job failed, retrying", "job", o.name, "attempt", attempt, "backoff", wait, "error", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// WithScope is a OneShot job named name that runs fn, whose owner reports
// its health through pending (a cell.PendingScope given as its Health
// before the job existed): when the job starts, pending opens as the scope
// named scope under the job's, so the health tree reads module → job →
// scope. A nil pending runs fn alone (its owner reports elsewhere). The
// glue of the reconciler and the reflector (reconcilercell,
// reflectorcell) runs theirs with it.
func WithScope(name, scope string, pending *cell.PendingScope, fn func(ctx context.Context) error, opts ...OneShotOption) Job {
	return OneShot(name, func(ctx context.Context, health cell.Health) error {
		if pending != nil {
			pending.Open(health, scope)
		}
		return fn(ctx)
	}, opts...)
}
