package reconciler

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// pruneState is the state of the prunes: Target.Prune with every desired
// object, by the interval (Config.FullReconciliationInterval) or on
// request (Reconciler.Prune). Refreshing Done objects is apart (refresh.go).
type pruneState struct {
	requested bool      // by Prune() or the interval
	attempts  int       // consecutive failed prunes
	retryAt   time.Time // after a failed prune
	err       error     // the prune error, if it failed
}

// pruneStep prunes if a prune is requested and due. It returns the table's
// initialization channel when a prune is requested but the table is not
// initialized yet (the package doc's "No prune before initialization"),
// and Config.PruneAfter while that is open.
// While an abandoned operation is still running no prune starts (it might
// remove what that operation is about to write): it waits for the
// operation to return.
func (r *reconciler[Obj]) pruneStep(ctx context.Context) <-chan struct{} {
	f := &r.pruning
	if !f.requested || time.Now().Before(f.retryAt) || r.exec.numStuck() > 0 {
		return nil
	}
	txn := r.db.ReadTxn()
	if ok, initWatch := r.cfg.Table.Initialized(txn); !ok {
		return initWatch
	}
	if after := r.cfg.PruneAfter; after != nil {
		select {
		case <-after:
		default:
			return after // Config.PruneAfter: not yet
		}
	}
	f.requested = false
	start := time.Now()
	j := &job[Obj]{ctx: ctx, txn: txn, n: 1, prune: true}
	r.exec.execute(j)
	if ctx.Err() != nil {
		return nil
	}
	out := j.pruneOut
	if out.err != nil {
		// Try again after a backoff.
		f.attempts++
		f.err = out.err
		if !strings.HasPrefix(out.err.Error(), "prune") && !strings.HasPrefix(out.err.Error(), "plan of prune") {
			f.err = fmt.Errorf("prune: %w", out.err)
		}
		f.requested = true
		f.retryAt = time.Now().Add(retryWait(f.attempts, r.cfg.RetryBackoffMin, r.cfg.RetryBackoffMax))
		r.cfg.Logger.Warn("Prune failed", "error", out.err, "attempt", f.attempts)
		r.cfg.Metrics.PruneRoundDone(r.cfg.Name, r.tableName, time.Since(start), f.err)
		return nil
	}
	f.attempts, f.err, f.retryAt = 0, nil, time.Time{}
	// A good prune is the moment to try every failing object again, not
	// after its backoff: what made them fail (a conflict, a missing
	// device) may have been fixed by hand meanwhile.
	r.retries.expedite(time.Now())
	// What the prune removed are leftovers; what it put back (a desired
	// rule deleted by hand, say) is drift repaired.
	leftovers, repairs := splitPrunePlan(out.plan)
	if len(leftovers) > 0 {
		r.cfg.Logger.Info("Pruned leftovers", "count", len(leftovers), "changes", leftovers.String())
		r.cfg.Metrics.Pruned(r.cfg.Name, r.tableName, len(leftovers))
	}
	now := time.Now()
	for _, c := range repairs {
		r.recordRepair(Repair{Object: c.Object, Changes: Plan{c}, FoundBy: FoundByPrune, At: now})
	}
	r.endRound()
	r.cfg.Metrics.PruneRoundDone(r.cfg.Name, r.tableName, time.Since(start), nil)
	return nil
}
