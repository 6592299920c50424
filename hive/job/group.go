package job

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/internal/names"
)

type groupState int

const (
	groupCreated groupState = iota
	groupRunning
	groupStopped
)

// group is the Group of NewGroup.
type group struct {
	cfg GroupConfig

	mu      sync.Mutex
	state   groupState
	late    *runner // jobs added while running
	refused error   // the first Add refused before the start
}

// NewGroup returns a Group whose jobs start and stop through
// cfg.Lifecycle and report under cfg.Health. It appends the group's own
// hook to the lifecycle at once, so call it while the hive (or whatever
// runs the lifecycle) is being constructed. A nil Lifecycle or Health is a
// bug in the caller, and NewGroup panics saying so.
func NewGroup(cfg GroupConfig) Group {
	if cfg.Lifecycle == nil || cfg.Health == nil {
		panic("job.NewGroup: GroupConfig.Lifecycle and GroupConfig.Health are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	g := &group{cfg: cfg}
	cfg.Lifecycle.Append(&groupHook{g})
	return g
}

// Add implements Group.
func (g *group) Add(jobs ...Job) error {
	if err := g.check(jobs); err != nil {
		g.cfg.Logger.Error("Jobs refused", "error", err)
		g.mu.Lock()
		if g.state == groupCreated && g.refused == nil {
			g.refused = err
		}
		g.mu.Unlock()
		return err
	}
	if len(jobs) == 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch g.state {
	case groupCreated:
		g.cfg.Lifecycle.Append(&jobsHook{g: g, jobs: jobs})
	case groupRunning:
		g.late.start(g, jobs)
	case groupStopped:
		g.cfg.Logger.Warn("Job added after its group stopped; dropped", "jobs", jobNames(jobs))
	}
	return nil
}

// check applies the name rule to every job.
func (g *group) check(jobs []Job) error {
	where := ""
	if len(g.cfg.Module) > 0 {
		where = "module " + g.cfg.Module.String() + ": "
	}
	for i, j := range jobs {
		if j == nil {
			return fmt.Errorf("%w: %sjob %d of %d is nil", ErrInvalidJob, where, i+1, len(jobs))
		}
		if !names.Valid(j.Name()) {
			return fmt.Errorf("%w: %sjob name %q must match %s (lower-case letters, digits, '-' and '_', starting with a letter)",
				ErrInvalidJob, where, j.Name(), names.Pattern)
		}
	}
	return nil
}

func (g *group) env(h cell.Health) env {
	return env{health: h, log: g.cfg.Logger, shutdowner: g.cfg.Shutdowner}
}

// groupHook marks the group running and, at stop, stops late jobs.
type groupHook struct{ g *group }

// HookName implements cell.HookNamer.
func (h *groupHook) HookName() string { return "job group" }

// Start marks the group running, so later Adds start jobs at once. It
// fails if an Add was refused before.
func (h *groupHook) Start(context.Context) error {
	h.g.mu.Lock()
	defer h.g.mu.Unlock()
	if h.g.refused != nil {
		return h.g.refused
	}
	h.g.state = groupRunning
	h.g.late = newRunner()
	return nil
}

// Stop marks the group stopped and stops the jobs added while it ran.
func (h *groupHook) Stop(ctx context.Context) error {
	h.g.mu.Lock()
	h.g.state = groupStopped
	late := h.g.late
	h.g.mu.Unlock()
	if late == nil {
		return nil
	}
	return late.stop(ctx)
}

// jobsHook starts and stops the jobs of one Add call.
type jobsHook struct {
	g    *group
	jobs []Job
	r    *runner
}

// HookName implements cell.HookNamer.
func (h *jobsHook) HookName() string { return "jobs " + jobNames(h.jobs) }

// Start starts the jobs, each in its own goroutine.
func (h *jobsHook) Start(context.Context) error {
	h.r = newRunner()
	h.r.start(h.g, h.jobs)
	return nil
}

// Stop cancels the jobs and waits for them.
func (h *jobsHook) Stop(ctx context.Context) error {
	if h.r == nil {
		return nil
	}
	return h.r.stop(ctx)
}

// runner owns the goroutines of a set of jobs.
type runner struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	scopes  []cell.Health
	names   []string
	running []bool // per job, until its goroutine returns
}

func newRunner() *runner {
	ctx, cancel := context.WithCancel(context.Background())
	return &runner{ctx: ctx, cancel: cancel}
}

func (r *runner) start(g *group, jobs []Job) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, j := range jobs {
		h := g.cfg.Health.NewScope(j.Name())
		i := len(r.names)
		r.scopes = append(r.scopes, h)
		r.names = append(r.names, j.Name())
		r.running = append(r.running, true)
		r.wg.Go(func() {
			defer func() {
				r.mu.Lock()
				r.running[i] = false
				r.mu.Unlock()
			}()
			j.run(r.ctx, g.env(h))
		})
	}
}

// stop cancels the jobs and waits for them until ctx is done. Either way
// it closes their health scopes; jobs still running then are abandoned and
// named in the error.
func (r *runner) stop(ctx context.Context) error {
	r.cancel()
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		r.mu.Lock()
		var stuck []string
		for i, name := range r.names {
			if r.running[i] {
				stuck = append(stuck, name)
			}
		}
		r.mu.Unlock()
		if len(stuck) > 0 {
			err = fmt.Errorf("%w: %s: %w", ErrJobsNotStopped, strings.Join(stuck, ", "), ctx.Err())
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range r.scopes {
		h.Close()
	}
	return err
}

func jobNames(jobs []Job) string {
	names := make([]string, len(jobs))
	for i, j := range jobs {
		names[i] = j.Name()
	}
	return strings.Join(names, ", ")
}
