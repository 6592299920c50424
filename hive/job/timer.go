package job

import (
	"context"
	"time"
)

// Trigger asks a Timer job to run now. Triggers that arrive while a run is
// pending are coalesced into one run.
type Trigger interface {
	// Trigger requests a run; it never blocks.
	Trigger()

	channel() <-chan struct{}
}

type trigger struct{ ch chan struct{} }

// NewTrigger returns a Trigger for one Timer (see WithTrigger).
func NewTrigger() Trigger { return &trigger{ch: make(chan struct{}, 1)} }

// Trigger implements Trigger.
func (t *trigger) Trigger() {
	select {
	case t.ch <- struct{}{}:
	default:
	}
}

func (t *trigger) channel() <-chan struct{} { return t.ch }

// timer runs a function periodically and on trigger.
type timer struct {
	name     string
	fn       func(ctx context.Context) error
	interval time.Duration
	trigger  Trigger
}

// TimerOption adjusts a Timer job.
type TimerOption func(*timer)

// WithTrigger makes t run the timer's function early. One trigger serves
// one timer.
func WithTrigger(t Trigger) TimerOption {
	return func(tm *timer) { tm.trigger = t }
}

// Timer is a job that calls fn every interval, counted from the end of the
// previous run (so runs never overlap), and whenever its trigger fires. The
// first run is one interval after start, or earlier if triggered. An
// interval of zero or less runs fn only when triggered. The job's health is
// OK after a run that returned nil and Degraded after one that failed; a
// failure does not stop the timer.
func Timer(name string, fn func(ctx context.Context) error, interval time.Duration, opts ...TimerOption) Job {
	t := &timer{name: name, fn: fn, interval: interval}
	for _, opt := range opts {
		opt(t)
	}
	return t
}

// Name implements Job.
func (t *timer) Name() string { return t.name }

func (t *timer) run(ctx context.Context, env env) {
	var tick <-chan time.Time
	var tm *time.Timer
	if t.interval > 0 {
		tm = time.NewTimer(t.interval)
		defer tm.Stop()
		tick = tm.C
	}
	var trig <-chan struct{}
	if t.trigger != nil {
		trig = t.trigger.channel()
	}
	env.health.OK("waiting for first run")
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
		case <-trig:
		}
		err := safely(env.log, t.name, func() error { return t.fn(ctx) })
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			env.health.Degraded("run failed", err)
			env.log.Warn("Timer job failed", "job", t.name, "error", err)
		} else {
			env.health.OK("ran")
		}
		if tm != nil {
			tm.Reset(t.interval)
		}
	}
}
