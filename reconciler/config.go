package reconciler

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/steadystate/steadystate/internal/backoff"
	"github.com/steadystate/steadystate/internal/names"
	"github.com/steadystate/steadystate/statedb"
)

// Config configures a Reconciler. Zero values mean the documented defaults.
type Config[Obj any] struct {
	// Name is used in metrics, health and logs. It follows the name rule
	// of table names: a lower-case letter, then up to 63 lower-case
	// letters, digits, '-' and '_'. Required.
	Name string
	// Table holds the desired objects. Required.
	Table statedb.RWTable[Obj]
	// Target is the real system. Required. If it also implements
	// BatchTarget, whole rounds are applied as batches; Planner,
	// BatchPlanner and DriftTarget are its other optional interfaces.
	Target Target[Obj]
	// GetObjectStatus returns the object's status. Required.
	GetObjectStatus func(Obj) Status
	// SetObjectStatus sets the status on an object the reconciler has
	// cloned with CloneObject and returns it. Required.
	SetObjectStatus func(Obj, Status) Obj
	// CloneObject returns a shallow copy of the object: stored objects are
	// never mutated. Required.
	CloneObject func(Obj) Obj
	// FullReconciliationInterval is the prune interval (the public
	// contract keeps this name; everything else says prune): how often to
	// prune: Target.Prune with
	// every desired object removes from the real system what is not
	// desired (leftovers). When set, the first prune runs as soon as the
	// table is initialized. 0 means only when Prune is called. A prune
	// that succeeds also retries every failing object at once, whatever
	// its backoff. (Done objects are re-applied by age, see
	// RefreshInterval, not here.)
	FullReconciliationInterval time.Duration
	// PruneAfter, if not nil, holds back every prune (by the interval or
	// asked for with Prune) until it is closed, as the table's
	// initialization does. A program that runs several reconcilers closes
	// it once each has taken its first objects: a prune lists the real
	// system and holds a snapshot of the whole database while it runs, so
	// one that starts beside the other tables' first rounds slows them
	// and keeps their first versions live. nil: a prune waits for the
	// table's initialization only.
	PruneAfter <-chan struct{}
	// RefreshInterval is the age after which a Done object is applied again
	// (refreshed), to repair drift in the real system; the age is that of
	// its status (Status.UpdatedAt), which every refresh renews. 0 (the
	// default) means never by age.
	RefreshInterval time.Duration
	// RefreshRate paces the refresh by age, so that a table whose objects
	// all come of age at once is not re-applied in one burst: at most
	// RefreshRate objects per second, in rounds of a tenth of a second's
	// worth. With a BatchPlanner target it counts rounds instead: at most
	// RefreshRate rounds per second, each of up to IncrementalRoundSize
	// objects checked against one read of the real system (one
	// PlanUpdateBatch per worker), and only the drifted ones applied; a
	// pass over 50,000 routes is then 50 reads, not 50,000. Either way up
	// to a second's worth may go at once. It does not pace the checks of
	// drift that a DriftTarget reports. Default DefaultRefreshRate.
	RefreshRate float64
	// Workers is how many target operations may be in flight at once
	// (Update, Delete, or a batch). Never two on the same object: a round
	// holds each object once, and rounds follow each other (see exec.go).
	// A batch target's rounds are split across the workers. Default 1.
	Workers int
	// MinRoundInterval is the least time between the moment the change
	// feed wakes the reconciler and the start of the last batch of rounds
	// that had work: changes that come meanwhile coalesce, and versions of
	// an object replaced before their round came are never applied. (The
	// changes already waiting when a batch of rounds starts go in rounds
	// of IncrementalRoundSize back to back.) 0 (the default) starts as
	// soon as there are changes.
	MinRoundInterval time.Duration
	// RetryBackoffMin is the first retry delay of a failed object (and of
	// a failed Prune); each further failure doubles it, with up to a
	// quarter of jitter, up to RetryBackoffMax. Default
	// DefaultRetryBackoffMin.
	RetryBackoffMin time.Duration
	// RetryBackoffMax caps the retry delay. Default DefaultRetryBackoffMax,
	// or RetryBackoffMin if that is larger.
	RetryBackoffMax time.Duration
	// IncrementalRoundSize is the most objects handled per round (and per
	// status write transaction). Default DefaultIncrementalRoundSize.
	IncrementalRoundSize int
	// OperationTimeout bounds each Target operation and plan (a whole
	// batch, for a batch target, and Prune): its context gets a deadline
	// between half and all of it from the operation's start (a worker's
	// operations share a deadline, renewed when half of it is left). An
	// operation that takes longer fails with the context's error and is
	// retried. One that ignores its context and runs past OperationTimeout
	// (plus a tenth) is abandoned: its objects fail with
	// ErrOperationAbandoned and are retried, health names it as stuck, the
	// rest of its round goes on, and no other operation on its objects
	// starts until it returns (they fail with ErrKeyBusy); while an
	// abandoned Prune runs, no operation on any object starts, and no prune
	// starts while any abandoned operation runs. Go cannot stop a
	// goroutine: the abandoned call's goroutine runs until the target
	// returns, then drops the result and frees the keys; a target that
	// never returns keeps it (and the keys) for the life of the process,
	// across Runs. Run does not wait for it. Default DefaultOperationTimeout.
	OperationTimeout time.Duration
	// Metrics receives the reconciler's measurements. Default NopMetrics.
	Metrics Metrics
	// Health receives the reconciler's health: OK with the object count,
	// Degraded with the failing objects, Stopped when Run returns. Default:
	// none (nil).
	Health Health
	// Logger is used for failures and panics, tagged with
	// reconciler=<Name>. Default slog.Default().
	Logger *slog.Logger
	// OnRepair, when set, is called with every repair of drift (see
	// Repair), from the goroutine running Run: it must not block. A
	// RepairLog's Add keeps the latest for a status report. Default: none.
	OnRepair func(Repair)
}

// Defaults for the zero values of Config. The retry backoffs are the
// project's one retry backoff's, the same as hive jobs': 100ms and 1m.
const (
	DefaultRetryBackoffMin      = backoff.DefaultMin
	DefaultRetryBackoffMax      = backoff.DefaultMax
	DefaultIncrementalRoundSize = 1000
	DefaultOperationTimeout     = time.Minute
	DefaultRefreshRate          = 100.0 // refreshes (rounds, with a BatchPlanner) per second
	DefaultWorkers              = 1
)

// validate checks cfg and fills in the defaults.
func (cfg *Config[Obj]) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !names.Valid(cfg.Name) {
		bad("Name %q must match %s", cfg.Name, names.Pattern)
	}
	if cfg.Table == nil {
		bad("Table is required")
	}
	if cfg.Target == nil {
		bad("Target is required")
	}
	if cfg.GetObjectStatus == nil {
		bad("GetObjectStatus is required")
	}
	if cfg.SetObjectStatus == nil {
		bad("SetObjectStatus is required")
	}
	if cfg.CloneObject == nil {
		bad("CloneObject is required")
	}
	if cfg.FullReconciliationInterval < 0 {
		bad("FullReconciliationInterval %v is negative", cfg.FullReconciliationInterval)
	}
	if cfg.RetryBackoffMin < 0 || cfg.RetryBackoffMax < 0 {
		bad("retry backoffs must not be negative")
	}
	if cfg.IncrementalRoundSize < 0 {
		bad("IncrementalRoundSize %d is negative", cfg.IncrementalRoundSize)
	}
	if cfg.RefreshInterval < 0 {
		bad("RefreshInterval %v is negative", cfg.RefreshInterval)
	}
	if cfg.RefreshRate < 0 {
		bad("RefreshRate %v is negative", cfg.RefreshRate)
	}
	if cfg.Workers < 0 {
		bad("Workers %d is negative", cfg.Workers)
	}
	if cfg.MinRoundInterval < 0 {
		bad("MinRoundInterval %v is negative", cfg.MinRoundInterval)
	}
	if cfg.OperationTimeout < 0 {
		bad("OperationTimeout %v is negative", cfg.OperationTimeout)
	}
	if cfg.RetryBackoffMin == 0 {
		cfg.RetryBackoffMin = DefaultRetryBackoffMin
	}
	if cfg.RetryBackoffMax == 0 {
		cfg.RetryBackoffMax = max(DefaultRetryBackoffMax, cfg.RetryBackoffMin)
	}
	if cfg.RetryBackoffMax < cfg.RetryBackoffMin {
		bad("RetryBackoffMax %v is below RetryBackoffMin %v", cfg.RetryBackoffMax, cfg.RetryBackoffMin)
	}
	if cfg.IncrementalRoundSize == 0 {
		cfg.IncrementalRoundSize = DefaultIncrementalRoundSize
	}
	if cfg.OperationTimeout == 0 {
		cfg.OperationTimeout = DefaultOperationTimeout
	}
	if cfg.RefreshRate == 0 {
		cfg.RefreshRate = DefaultRefreshRate
	}
	if cfg.Workers == 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NopMetrics{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Logger = cfg.Logger.With("reconciler", cfg.Name)
	if len(errs) > 0 {
		return fmt.Errorf("%w %q: %w", ErrInvalidConfig, cfg.Name, errors.Join(errs...))
	}
	return nil
}
