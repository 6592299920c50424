package reconciler

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	retry "github.com/steadystate/steadystate/internal/backoff"
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
	// BatchTarget, whole rounds are applied as batches.
	Target Target[Obj]
	// GetObjectStatus returns the object's status. Required.
	GetObjectStatus func(Obj) Status
	// SetObjectStatus sets the status on an object the reconciler has
	// cloned with CloneObject and returns it. Required.
	SetObjectStatus func(Obj, Status) Obj
	// CloneObject returns a shallow copy of the object: stored objects are
	// never mutated. Required.
	CloneObject func(Obj) Obj
	// FullReconciliationInterval is how often to run a full
	// reconciliation; when set, the first one runs as soon as the table is
	// initialized. 0 means only when Prune is called.
	FullReconciliationInterval time.Duration
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
	// OperationTimeout bounds each Target operation (a whole batch, for a
	// batch target, and Prune): its context gets a deadline between half
	// and all of it from the operation's start (the operations of a round
	// share a deadline, renewed when half of it is left). An operation that
	// takes longer fails with the context's error and is retried. Default
	// DefaultOperationTimeout.
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
}

// Defaults for the zero values of Config. The retry backoffs are the
// project's one retry backoff's, the same as hive jobs': 100ms and 1m.
const (
	DefaultRetryBackoffMin      = retry.DefaultMin
	DefaultRetryBackoffMax      = retry.DefaultMax
	DefaultIncrementalRoundSize = 1000
	DefaultOperationTimeout     = time.Minute
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
