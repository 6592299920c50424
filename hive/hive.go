package hive

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/pflag"
	"go.uber.org/dig"

	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/health"
	"github.com/steadystate/steadystate/hive/internal/build"
	"github.com/steadystate/steadystate/hive/job"
)

// Defaults for Options.
const (
	DefaultStartTimeout = 5 * time.Minute
	DefaultStopTimeout  = time.Minute
)

// Options configure a hive. Zero values mean the defaults.
type Options struct {
	// StartTimeout bounds Start (default DefaultStartTimeout).
	StartTimeout time.Duration
	// StopTimeout bounds Stop and the rollback of a failed Start (default
	// DefaultStopTimeout).
	StopTimeout time.Duration
	// Logger is the root logger; modules get it tagged with their id
	// (default slog.Default()).
	Logger *slog.Logger
	// EnvPrefix makes config flags take values from environment variables
	// named PREFIX_FLAG_NAME (see EnvName): with prefix "AGENT",
	// --metrics-addr reads AGENT_METRICS_ADDR. A flag given on the command
	// line wins over the environment. Default "": no environment variables
	// are read.
	EnvPrefix string
}

// Hive is an application assembled from cells.
type Hive struct {
	opts     Options
	root     *build.Node // the cells, as one group
	flags    *pflag.FlagSet
	flagsErr error
	lc       *lifecycle
	registry *prometheus.Registry
	health   *health.Tree
	shutdown chan error

	mu          sync.Mutex // guards the fields below
	populated   bool
	populateErr error
	state       hiveState
}

type hiveState int

const (
	stateNew hiveState = iota
	stateStarted
	stateStopped
)

// New returns a hive of cells with default Options.
func New(cells ...cell.Cell) *Hive { return NewWithOptions(Options{}, cells...) }

// NewWithOptions returns a hive of cells. It declares the flags of the
// config cells right away (see RegisterFlags); errors are reported by
// Populate.
func NewWithOptions(opts Options, cells ...cell.Cell) *Hive {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = DefaultStopTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	h := &Hive{
		opts:     opts,
		root:     build.NodeOf(cell.Group(cells...)),
		flags:    pflag.NewFlagSet("hive", pflag.ContinueOnError),
		lc:       &lifecycle{log: opts.Logger},
		registry: prometheus.NewRegistry(),
		health:   health.NewTree(),
		shutdown: make(chan error, 1),
	}
	h.flagsErr = build.RegisterFlags(h.flags, h.root)
	h.registry.MustRegister(
		h.health,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return h
}

// RegisterFlags adds the flags of the config cells to fs, for programs that
// parse their own command line. The hive reads the values that fs parses.
func (h *Hive) RegisterFlags(fs *pflag.FlagSet) { fs.AddFlagSet(h.flags) }

// Health returns the hive's health tree.
func (h *Hive) Health() *health.Tree { return h.health }

// Registry returns the hive's Prometheus registry.
func (h *Hive) Registry() *prometheus.Registry { return h.registry }

// Populate builds the object graph: it applies environment variables to
// unset flags, registers every cell and calls the Invoke functions, which
// construct what they need. Nothing is started. It runs once; later calls
// return the first result. Errors name the module and the missing or
// duplicate type, the hook or the flag (see the cell package's errors).
func (h *Hive) Populate() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.populated {
		h.populated = true
		h.populateErr = h.populateLocked()
	}
	return h.populateErr
}

func (h *Hive) populateLocked() error {
	if h.flagsErr != nil {
		return h.flagsErr
	}
	if err := applyEnv(h.flags, h.opts.EnvPrefix); err != nil {
		return err
	}
	c := dig.New(dig.DeferAcyclicVerification())
	for _, ctor := range []any{
		func() *prometheus.Registry { return h.registry },
		func() prometheus.Registerer { return h.registry },
		func() prometheus.Gatherer { return h.registry },
		func() *health.Tree { return h.health },
		func() cell.Shutdowner { return h },
	} {
		if err := c.Provide(ctor); err != nil {
			return fmt.Errorf("hive: %w", err)
		}
	}
	return build.Build(c, build.Options{
		Flags:           h.flags,
		ModuleProviders: h.moduleProviders,
	}, h.root)
}

// moduleProviders are the constructors of the values every module (and the
// root) gets its own of.
func (h *Hive) moduleProviders(id string, path []string) []any {
	full := cell.FullModuleID(path)
	log := h.opts.Logger
	if len(full) > 0 {
		log = log.With("module", full.String())
	}
	return []any{
		func() cell.ModuleID { return cell.ModuleID(id) },
		func() cell.FullModuleID { return full },
		func() *slog.Logger { return log },
		func() cell.Health { return h.health.Module(full) },
		func() cell.Lifecycle { return moduleLifecycle{lc: h.lc, module: full.String()} },
		func(hl cell.Health, lc cell.Lifecycle) job.Group {
			return job.NewGroup(job.GroupConfig{Module: full, Lifecycle: lc, Health: hl, Logger: log, Shutdowner: h})
		},
	}
}

// Start populates the hive if needed and starts its hooks in order, within
// Options.StartTimeout. If a hook fails, the hooks already started are
// stopped in reverse (within Options.StopTimeout) and the error names the
// failed hook. Errors: those of Populate, ErrStartFailed, ErrStartTimeout,
// ErrAlreadyStarted, and ErrStopFailed / ErrStopTimeout from the rollback.
func (h *Hive) Start(ctx context.Context) error {
	if err := h.Populate(); err != nil {
		return err
	}
	h.mu.Lock()
	if h.state != stateNew {
		h.mu.Unlock()
		return ErrAlreadyStarted
	}
	h.state = stateStarted
	h.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, h.opts.StartTimeout)
	defer cancel()
	t0 := time.Now()
	h.opts.Logger.Info("Starting")
	h.health.Starting()
	if err := h.lc.start(ctx); err != nil {
		h.opts.Logger.Error("Start failed, stopping what started", "error", err)
		h.health.Stopping()
		stopCtx, cancel := context.WithTimeout(context.Background(), h.opts.StopTimeout)
		defer cancel()
		return errors.Join(err, h.lc.stop(stopCtx))
	}
	h.health.Started()
	h.opts.Logger.Info("Started", "duration", time.Since(t0))
	return nil
}

// Stop stops the started hooks in reverse order within Options.StopTimeout
// and returns their joined errors (ErrStopFailed, ErrStopTimeout). It calls
// every hook's Stop even after one failed or the deadline passed. It never
// populates: stopping a hive that is not running does nothing. Jobs that
// ignore their context past the deadline are abandoned (ErrStopTimeout
// wrapping job.ErrJobsNotStopped; see package job).
func (h *Hive) Stop(ctx context.Context) error {
	h.mu.Lock()
	if h.state != stateStarted {
		h.mu.Unlock()
		return nil
	}
	h.state = stateStopped
	h.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, h.opts.StopTimeout)
	defer cancel()
	t0 := time.Now()
	h.opts.Logger.Info("Stopping")
	h.health.Stopping()
	err := h.lc.stop(ctx)
	h.opts.Logger.Info("Stopped", "duration", time.Since(t0))
	return err
}

// Shutdown implements cell.Shutdowner: it asks Run to stop the hive (with
// cell.ShutdownWithError, to return that error). Only the first request
// counts; it never blocks and may come before Run started waiting.
func (h *Hive) Shutdown(opts ...cell.ShutdownOption) {
	req := cell.NewShutdownRequest(opts...)
	select {
	case h.shutdown <- req.Err:
	default:
	}
}

// Run starts the hive, waits for SIGINT, SIGTERM or Shutdown, and stops it.
// It returns the start error, or the shutdown error joined with the stop
// errors.
func (h *Hive) Run() error {
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	if err := h.Start(ctx); err != nil {
		return err
	}
	var err error
	select {
	case <-ctx.Done():
		h.opts.Logger.Info("Signal received, shutting down")
	case err = <-h.shutdown:
		h.opts.Logger.Info("Shutdown requested", "error", err)
	}
	stopSignals() // a second signal now kills the process
	return errors.Join(err, h.Stop(context.Background()))
}
