package job

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/steadystate/steadystate/hive/cell"
)

type groupState int

const (
	groupCreated groupState = iota
	groupRunning
	groupStopped
)

// group is the default Group.
type group struct {
	health     cell.Health
	lc         cell.Lifecycle
	log        *slog.Logger
	shutdowner cell.Shutdowner

	mu    sync.Mutex
	state groupState
	late  *runner // jobs added while running
}

// Add implements Group.
func (g *group) Add(jobs ...Job) {
	if len(jobs) == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch g.state {
	case groupCreated:
		g.lc.Append(&jobsHook{g: g, jobs: jobs})
	case groupRunning:
		g.late.start(g, jobs)
	case groupStopped:
		g.log.Warn("Job added after its group stopped; dropped", "jobs", jobNames(jobs))
	}
}

func (g *group) env(h cell.Health) env {
	return env{health: h, log: g.log, shutdowner: g.shutdowner}
}

// groupHook marks the group running and, at stop, stops late jobs.
type groupHook struct{ g *group }

// HookName implements cell.HookNamer.
func (h *groupHook) HookName() string { return "job group" }

// Start marks the group running, so later Adds start jobs at once.
func (h *groupHook) Start(context.Context) error {
	h.g.mu.Lock()
	defer h.g.mu.Unlock()
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

	mu     sync.Mutex
	scopes []cell.Health
	names  []string
}

func newRunner() *runner {
	ctx, cancel := context.WithCancel(context.Background())
	return &runner{ctx: ctx, cancel: cancel}
}

func (r *runner) start(g *group, jobs []Job) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, j := range jobs {
		h := g.health.NewScope(j.Name())
		r.scopes = append(r.scopes, h)
		r.names = append(r.names, j.Name())
		r.wg.Go(func() { j.run(r.ctx, g.env(h)) })
	}
}

// stop cancels the jobs, waits for them until ctx is done and closes their
// health scopes.
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
		err = fmt.Errorf("%w: %s: %w", ErrJobsNotStopped, strings.Join(r.names, ", "), ctx.Err())
		r.mu.Unlock()
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
