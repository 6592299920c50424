package reconciler

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/statedb"
)

// fullState is the progress of a full reconciliation: Target.Prune with
// every desired object, then an Update (refresh) of every Done object to
// repair drift in the real system. The refresh goes in chunks of
// IncrementalRoundSize, each after the incremental work of the loop, so
// that incremental work is never starved.
type fullState struct {
	requested bool      // by Prune() or the interval
	active    bool      // refresh under way
	started   time.Time // of the current full reconciliation
	next      index.Key // primary key to continue the refresh from
	attempts  int       // consecutive failed prunes
	retryAt   time.Time // after a failed prune
	err       error     // the prune error, if it failed
}

// fullStep starts or continues a full reconciliation. It returns the
// table's initialization channel when a full reconciliation is requested
// but the table is not initialized yet (the package doc's "No prune before
// initialization").
func (r *reconciler[Obj]) fullStep(ctx context.Context) <-chan struct{} {
	f := &r.full
	if !f.active {
		if !f.requested || time.Now().Before(f.retryAt) {
			return nil
		}
		txn := r.db.ReadTxn()
		if ok, initWatch := r.cfg.Table.Initialized(txn); !ok {
			return initWatch
		}
		f.requested = false
		f.started = time.Now()
		opCtx, cancel := context.WithTimeout(ctx, r.cfg.OperationTimeout)
		err := r.prune(opCtx, txn)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			// Try again after a backoff; the refresh waits for a good prune.
			f.attempts++
			f.err = fmt.Errorf("prune: %w", err)
			f.requested = true
			f.retryAt = time.Now().Add(backoff(f.attempts, r.cfg.RetryBackoffMin, r.cfg.RetryBackoffMax))
			r.cfg.Logger.Warn("Prune failed", "error", err, "attempt", f.attempts)
			r.cfg.Metrics.FullReconciliationDone(r.cfg.Name, r.tableName, time.Since(f.started), f.err)
			return nil
		}
		f.attempts, f.err, f.retryAt = 0, nil, time.Time{}
		f.active = true
		f.next = nil
	}
	r.refreshChunk(ctx)
	return nil
}

// refreshChunk updates the next IncrementalRoundSize Done objects.
func (r *reconciler[Obj]) refreshChunk(ctx context.Context) {
	f := &r.full
	txn := r.db.ReadTxn()
	round := make([]work[Obj], 0, min(r.cfg.IncrementalRoundSize, 1024))
	finished := true
	for obj, rev := range r.cfg.Table.LowerBound(txn, statedb.QueryByPrimaryKey[Obj](r.cfg.Table, f.next)) {
		key := r.cfg.Table.PrimaryKey(obj)
		if f.next != nil && bytes.Equal(key, f.next) {
			continue
		}
		if len(round) >= r.cfg.IncrementalRoundSize {
			finished = false
			break
		}
		f.next = key
		// Pending objects are the incremental loop's, failing ones the
		// retry queue's; only Done objects are refreshed.
		if r.cfg.GetObjectStatus(obj).Kind == StatusKindDone {
			round = append(round, work[Obj]{obj: obj, rev: rev, key: string(key)})
		}
	}
	if len(round) > 0 {
		r.processRound(ctx, txn, round, true)
	}
	if finished && ctx.Err() == nil {
		f.active = false
		r.cfg.Metrics.FullReconciliationDone(r.cfg.Name, r.tableName, time.Since(f.started), nil)
	}
}
