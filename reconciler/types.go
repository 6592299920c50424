package reconciler

import (
	"context"
	"iter"

	"github.com/steadystate/steadystate/statedb"
)

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
	// Prune requests a prune now (once the table is initialized).
	Prune()
	// WaitUntilReconciled returns once every change to the table up to
	// revision rev has been attempted. It returns the revision the
	// reconciler has reached. When some objects failed their latest attempt
	// (they are in Error and will be retried), the error is a
	// *NotReconciledError (match it with errors.As) with how many and the
	// lowest revision waiting for a retry; it wraps ErrNotAllReconciled;
	// the objects' statuses say which. It returns ctx's error if ctx ends
	// first.
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
