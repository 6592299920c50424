package reconciler

import (
	"context"
	"fmt"
	"time"

	"github.com/steadystate/steadystate/statedb"
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
// initialized yet (the package doc's "No prune before initialization").
// While an abandoned operation is still running no prune starts (it might
// remove what that operation is about to write): it waits for the
// operation to return.
func (r *reconciler[Obj]) pruneStep(ctx context.Context) <-chan struct{} {
	f := &r.full
	if !f.requested || time.Now().Before(f.retryAt) || r.exec.numStuck() > 0 {
		return nil
	}
	txn := r.db.ReadTxn()
	if ok, initWatch := r.cfg.Table.Initialized(txn); !ok {
		return initWatch
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
		f.err = fmt.Errorf("prune: %w", out.err)
		f.requested = true
		f.retryAt = time.Now().Add(backoff(f.attempts, r.cfg.RetryBackoffMin, r.cfg.RetryBackoffMax))
		r.cfg.Logger.Warn("Prune failed", "error", out.err, "attempt", f.attempts)
		r.cfg.Metrics.FullReconciliationDone(r.cfg.Name, r.tableName, time.Since(start), f.err)
		return nil
	}
	f.attempts, f.err, f.retryAt = 0, nil, time.Time{}
	if len(out.plan) > 0 {
		r.cfg.Logger.Info("Pruned leftovers", "count", len(out.plan), "changes", out.plan.String())
		r.cfg.Metrics.Pruned(r.cfg.Name, r.tableName, len(out.plan))
	}
	r.cfg.Metrics.FullReconciliationDone(r.cfg.Name, r.tableName, time.Since(start), nil)
	return nil
}

// refreshState is the progress of refreshing by age: passes over the table
// in primary key order, each object whose Done status is older than
// Config.RefreshInterval applied again, at most Config.RefreshRate per
// second (a token bucket holding up to one second's worth).
type refreshState struct {
	cursor  []byte    // primary key to continue the pass after; nil: start
	tokens  float64   // refreshes allowed now
	filled  time.Time // when tokens was last topped up
	waiting int       // due objects found at the pass's start, less those refreshed since
}

// refreshStep refreshes the Done objects that came of age, as many as the
// rate allows, and returns when to call it again (the zero time for never).
// A pass starts at most every tenth of RefreshInterval (each start counts
// the table once), so an object is refreshed at most that much late.
func (r *reconciler[Obj]) refreshStep(ctx context.Context) time.Time {
	if r.cfg.RefreshInterval <= 0 {
		return time.Time{}
	}
	s := &r.refresh
	now := time.Now()
	burst := max(r.cfg.RefreshRate, 1)
	if s.filled.IsZero() {
		s.tokens = burst
	} else {
		s.tokens = min(burst, s.tokens+now.Sub(s.filled).Seconds()*r.cfg.RefreshRate)
	}
	s.filled = now
	// Refresh in batches of a tenth of a second's worth (or what is
	// waiting, if less) rather than one by one as tokens trickle in.
	need := max(1, min(burst/10, float64(s.waiting)))
	if s.cursor != nil && s.tokens < need {
		return now.Add(time.Duration((need - s.tokens) / r.cfg.RefreshRate * float64(time.Second)))
	}
	txn := r.db.ReadTxn()
	if s.cursor == nil {
		// A new pass: count what is due, for the RefreshQueue metric.
		var first time.Time
		s.waiting, first = r.countDue(txn, now)
		r.cfg.Metrics.RefreshQueue(r.cfg.Name, r.tableName, s.waiting)
		if s.waiting == 0 {
			// Nothing due: sleep until the first object comes of age.
			if earliest := now.Add(r.cfg.RefreshInterval / 10); first.Before(earliest) {
				return earliest
			}
			return first
		}
	}
	limit := min(int(s.tokens), r.cfg.IncrementalRoundSize)
	round := make([]work[Obj], 0, min(limit, 1024))
	finished := true
	for obj, rev := range r.cfg.Table.LowerBound(txn, statedb.QueryByPrimaryKey[Obj](r.cfg.Table, s.cursor)) {
		key := r.cfg.Table.PrimaryKey(obj)
		if s.cursor != nil && string(key) == string(s.cursor) {
			continue
		}
		if len(round) >= limit {
			finished = false
			break
		}
		s.cursor = key
		// Pending objects are the incremental loop's, failing ones the
		// retry queue's; only Done objects are refreshed.
		st := r.cfg.GetObjectStatus(obj)
		if st.Kind != StatusKindDone {
			continue
		}
		if due := st.UpdatedAt.Add(r.cfg.RefreshInterval); now.Before(due) {
			continue
		}
		round = append(round, work[Obj]{obj: obj, rev: rev, key: string(key)})
	}
	s.tokens -= float64(len(round))
	s.waiting = max(s.waiting-len(round), 0)
	r.cfg.Metrics.RefreshQueue(r.cfg.Name, r.tableName, s.waiting)
	if len(round) > 0 {
		r.processRound(ctx, txn, round, true)
	}
	if finished {
		s.cursor = nil
		s.waiting = 0
		r.cfg.Metrics.RefreshQueue(r.cfg.Name, r.tableName, 0)
		return time.Now().Add(r.cfg.RefreshInterval / 10)
	}
	return time.Now() // more to do: after the next incremental work
}

// countDue returns how many Done objects are due for a refresh at now, and
// when the first of the others comes of age (at the latest one
// RefreshInterval from now: objects done later are younger).
func (r *reconciler[Obj]) countDue(txn statedb.ReadTxn, now time.Time) (int, time.Time) {
	n, first := 0, now.Add(r.cfg.RefreshInterval)
	for obj := range r.cfg.Table.All(txn) {
		st := r.cfg.GetObjectStatus(obj)
		if st.Kind != StatusKindDone {
			continue
		}
		if due := st.UpdatedAt.Add(r.cfg.RefreshInterval); !now.Before(due) {
			n++
		} else if due.Before(first) {
			first = due
		}
	}
	return n, first
}
