package reconciler

import (
	"context"
	"time"

	"github.com/steadystate/steadystate/statedb"
)

// refreshState is the progress of refreshing by age: passes over the table
// in primary key order, each object whose Done status is older than
// Config.RefreshInterval applied again (with a Planner target: checked,
// see check.go), paced by a token bucket of Config.RefreshRate per second
// holding up to one second's worth (at least one token):
//
//   - a token is one object, and objects go in rounds of a tenth of a
//     second's worth (or what is waiting, if less);
//   - with a BatchPlanner target, whose round is checked against one read
//     of the real system (one route listing, one iptables-save) however
//     many objects it holds, a token is one round, of up to
//     IncrementalRoundSize objects: a pass over 50,000 routes is 50
//     rounds, not 50,000 reads.
//
// A pass starts with a count of the objects due (for the RefreshQueue
// metric) and goes on in rounds as the tokens allow; the next pass starts
// no sooner than a tenth of RefreshInterval after the last one ended (or
// when the first object comes of age, if later), so that a table is
// counted at most ten times per RefreshInterval, and an object is refreshed
// at most that much late.
type refreshState struct {
	cursor   []byte    // primary key to continue the pass after; nil: between passes
	nextPass time.Time // no pass starts before
	tokens   float64   // refreshes (rounds, with a BatchPlanner) allowed now
	filled   time.Time // when tokens was last topped up
	waiting  int       // due objects counted at the pass's start, less those refreshed since
}

// refreshStep refreshes the Done objects that came of age, as many as the
// rate allows, and returns when to call it again (the zero time for never).
func (r *reconciler[Obj]) refreshStep(ctx context.Context) time.Time {
	if r.cfg.RefreshInterval <= 0 {
		return time.Time{}
	}
	s := &r.refresh
	now := time.Now()
	if s.cursor == nil && now.Before(s.nextPass) {
		return s.nextPass
	}
	burst := max(r.cfg.RefreshRate, 1)
	if s.filled.IsZero() {
		s.tokens = burst
	} else {
		s.tokens = min(burst, s.tokens+now.Sub(s.filled).Seconds()*r.cfg.RefreshRate)
	}
	s.filled = now
	txn := r.db.ReadTxn()
	if s.cursor == nil {
		var first time.Time
		s.waiting, first = r.countDue(txn, now)
		r.cfg.Metrics.RefreshQueue(r.cfg.Name, r.tableName, s.waiting)
		if s.waiting == 0 {
			// Nothing due: no pass until the first object comes of age.
			s.nextPass = later(first, now.Add(r.cfg.RefreshInterval/10))
			return s.nextPass
		}
		s.cursor = []byte{} // the pass starts at the first key
	}
	// Refresh in rounds of a tenth of a second's worth (or what is
	// waiting, if less) rather than one by one as tokens trickle in; with
	// a BatchPlanner, in rounds of IncrementalRoundSize, a token each.
	perRound := r.batchPlanner != nil
	need, limit := 1.0, r.cfg.IncrementalRoundSize
	if !perRound {
		need = max(1, min(burst/10, float64(s.waiting)))
		limit = min(int(s.tokens), limit)
	}
	if s.tokens < need {
		return now.Add(time.Duration((need - s.tokens) / r.cfg.RefreshRate * float64(time.Second)))
	}
	// At most what was due when the pass began: a pass of 50,000 objects
	// is not grown step by step (26 MB allocated for a 5.5 MB round).
	round := make([]work[Obj], 0, min(limit, max(s.waiting, 1)))
	finished := true
	for obj, rev := range r.cfg.Table.LowerBound(txn, statedb.QueryByPrimaryKey[Obj](r.cfg.Table, s.cursor)) {
		key := r.cfg.Table.PrimaryKey(obj)
		if len(s.cursor) > 0 && string(key) == string(s.cursor) {
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
		if st.Kind != StatusKindDone || now.Before(st.UpdatedAt.Add(r.cfg.RefreshInterval)) {
			continue
		}
		round = append(round, work[Obj]{obj: obj, rev: rev, key: string(key), found: FoundByRefresh})
	}
	switch {
	case !perRound:
		s.tokens -= float64(len(round))
	case len(round) > 0:
		s.tokens--
	}
	s.waiting = max(s.waiting-len(round), 0)
	r.cfg.Metrics.RefreshQueue(r.cfg.Name, r.tableName, s.waiting)
	if len(round) > 0 {
		if r.planner != nil {
			// Plan first, and repair only what differs (check.go).
			r.checkRound(ctx, txn, round, true)
		} else {
			r.processRound(ctx, txn, round, true)
		}
	}
	if finished {
		s.cursor, s.waiting = nil, 0
		r.cfg.Metrics.RefreshQueue(r.cfg.Name, r.tableName, 0)
		s.nextPass = time.Now().Add(r.cfg.RefreshInterval / 10)
		return s.nextPass
	}
	// More to do: the round took tokens, so the next step waits for them.
	return time.Now()
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

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
