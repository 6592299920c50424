package reconciler

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/steadystate/steadystate/statedb"
)

// Config configures a Reconciler. Zero values mean the documented defaults.
type Config[Obj any] struct {
	// Name is used in metrics, health and logs. It must match
	// [a-z][a-z0-9_-]*. Required.
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
	// RetryBackoffMin is the first retry delay of a failed object.
	// Default DefaultRetryBackoffMin.
	RetryBackoffMin time.Duration
	// RetryBackoffMax caps the retry delay. Default DefaultRetryBackoffMax,
	// or RetryBackoffMin if that is larger.
	RetryBackoffMax time.Duration
	// IncrementalRoundSize is the most objects handled per round (and per
	// status write transaction). Default DefaultIncrementalRoundSize.
	IncrementalRoundSize int
	// OperationTimeout bounds each Target operation (a whole batch, for a
	// batch target, and Prune): its context gets a deadline between half
	// and all of it from the operation's start (see opContext). An
	// operation that takes longer fails with the context's error and is
	// retried. Default DefaultOperationTimeout.
	OperationTimeout time.Duration
	// Metrics receives the reconciler's measurements. Default: none.
	Metrics Metrics
	// Health receives the reconciler's health. Default: none.
	Health Health
	// Logger is used for failures and panics. Default: slog.Default()
	// tagged with the reconciler's name.
	Logger *slog.Logger
}

// Defaults for the zero values of Config.
const (
	DefaultRetryBackoffMin      = 100 * time.Millisecond
	DefaultRetryBackoffMax      = time.Minute
	DefaultIncrementalRoundSize = 1000
	DefaultOperationTimeout     = time.Minute
)

var nameRe = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

// ErrInvalidConfig is wrapped by the error New returns for a bad Config.
var ErrInvalidConfig = errors.New("invalid reconciler config")

// validate checks cfg and fills in the defaults.
func (cfg *Config[Obj]) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !nameRe.MatchString(cfg.Name) {
		bad("Name %q must match %s", cfg.Name, nameRe)
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
