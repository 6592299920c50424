package reconciler

import (
	"context"
	"iter"
	"time"

	"github.com/steadystate/steadystate/statedb"
)

// StatusKind is where an object is in its reconciliation.
type StatusKind uint8

const (
	// StatusKindUnset is the zero value: the object was never given a
	// status. The reconciler does not act on it.
	StatusKindUnset StatusKind = iota
	// StatusKindPending: the object was written and waits to be applied.
	StatusKindPending
	// StatusKindRefreshing: the object is unchanged but should be applied
	// again (for example because the real system may have drifted).
	StatusKindRefreshing
	// StatusKindDone: the object was applied successfully.
	StatusKindDone
	// StatusKindError: the last attempt failed; see Status.Error.
	StatusKindError
)

var statusKindNames = [...]string{"", "Pending", "Refreshing", "Done", "Error"}

// String returns "", "Pending", "Refreshing", "Done" or "Error".
func (k StatusKind) String() string {
	if int(k) < len(statusKindNames) {
		return statusKindNames[k]
	}
	return "Unknown"
}

// Status is the reconciliation status kept in each desired object.
type Status struct {
	Kind      StatusKind `json:"kind" yaml:"kind"`
	UpdatedAt time.Time  `json:"updatedAt,omitzero" yaml:"updatedAt,omitempty"`
	Error     string     `json:"error,omitempty" yaml:"error,omitempty"`
}

// StatusPending returns a Pending status: what a writer sets on every
// object it inserts or changes.
func StatusPending() Status { return Status{Kind: StatusKindPending, UpdatedAt: time.Now()} }

// StatusRefreshing returns a Refreshing status: set it to have an
// unchanged object applied again.
func StatusRefreshing() Status { return Status{Kind: StatusKindRefreshing, UpdatedAt: time.Now()} }

// StatusDone returns a Done status.
func StatusDone() Status { return Status{Kind: StatusKindDone, UpdatedAt: time.Now()} }

// StatusError returns an Error status with err's message.
func StatusError(err error) Status {
	return Status{Kind: StatusKindError, UpdatedAt: time.Now(), Error: err.Error()}
}

// IsPending reports whether the reconciler must act on an object with this
// status (Pending or Refreshing).
func (s Status) IsPending() bool {
	return s.Kind == StatusKindPending || s.Kind == StatusKindRefreshing
}

// String returns the kind, with the error for Error.
func (s Status) String() string {
	if s.Kind == StatusKindError {
		return "Error: " + s.Error
	}
	return s.Kind.String()
}

// Target is the real system. Operations must be idempotent: an Update of
// an object that is already applied, or a Delete of one that is already
// gone, succeeds without changing anything.
type Target[Obj any] interface {
	Update(ctx context.Context, txn statedb.ReadTxn, obj Obj) error
	Delete(ctx context.Context, txn statedb.ReadTxn, obj Obj) error
	// Prune removes from the real system what is not in desired.
	Prune(ctx context.Context, txn statedb.ReadTxn, desired iter.Seq2[Obj, statedb.Revision]) error
}

// BatchEntry is one object of a batch operation; the target sets Result.
type BatchEntry[Obj any] struct {
	Object   Obj
	Revision statedb.Revision
	Result   error
}

// BatchTarget is an optional interface of a Target that applies a whole
// round at once (for example one iptables-restore). The reconciler detects
// it with a type assertion and then calls UpdateBatch and DeleteBatch
// instead of Update and Delete for incremental rounds and retries. Each
// entry's Result says how that object fared.
type BatchTarget[Obj any] interface {
	UpdateBatch(ctx context.Context, txn statedb.ReadTxn, batch []BatchEntry[Obj])
	DeleteBatch(ctx context.Context, txn statedb.ReadTxn, batch []BatchEntry[Obj])
}

// Reconciler reconciles one table with one target.
type Reconciler[Obj any] interface {
	// Run reconciles until ctx is cancelled; it returns nil then, or an
	// error if it could not start.
	Run(ctx context.Context) error
	// Prune requests a full reconciliation now (once the table is
	// initialized).
	Prune()
	// WaitUntilReconciled returns once every change to the table up to
	// revision rev has been attempted. It returns the revision the
	// reconciler has reached. When some objects failed their latest attempt
	// (they are in Error and will be retried), the error wraps
	// ErrNotAllReconciled and says how many; the objects' statuses say
	// which. It returns ctx's error if ctx ends first.
	WaitUntilReconciled(ctx context.Context, rev statedb.Revision) (statedb.Revision, error)
}

// Health is where the reconciler reports its health (see Config.Health).
// hive's cell.Health satisfies it, and reconcilercell.Register gives each
// reconciler a scope of the hive's health tree; without hive it may be nil.
type Health interface {
	OK(status string)
	Degraded(reason string, err error)
	Stopped(reason string)
}
