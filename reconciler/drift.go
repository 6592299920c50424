package reconciler

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/statedb"
)

// DriftTarget is an optional interface of a Target that can tell when the
// real system may have changed behind the reconciler's back: a route
// deleted by hand (rtnetlink notifications), a rule flushed (nf_tables
// notifications), a setting rewritten (a cheap poll). The reconciler
// detects it with a type assertion and, while Run runs, calls WatchDrift
// in a goroutine of its own.
//
// The reconciler then checks exactly the objects reported, apart from
// RefreshInterval and never paced by RefreshRate: a Done object is
// planned against the real system (with a Planner target; in batches with
// a BatchPlanner), and only if its plan is not empty is it marked
// Refreshing, applied (in batches with a BatchTarget) and Done again,
// counted and logged as drift repaired with its changes. A failing object
// that is reported is retried at once, whatever its backoff (what it
// waited for, a device say, may have come). Reports that come while a
// round runs are coalesced into the next: an object reported many times
// is checked once. Reports of keys that are not in the table are dropped
// at the cost of one lookup. A target that cannot tell the objects of a
// group apart reports their common key prefix. Without a Planner the
// reported Done objects are simply applied again.
type DriftTarget[Obj any] interface {
	// WatchDrift watches the real system and reports to drift until ctx
	// ends, then returns nil. Once it watches it must report ChangedAll,
	// since what changed before is unknown; that report also tells the
	// reconciler that the watch works. It returns an error when it cannot
	// watch (any more): a namespace that is gone, a socket that failed.
	// The reconciler reports the error in its health (Degraded) and calls
	// WatchDrift again after its retry backoff (Config.RetryBackoffMin to
	// RetryBackoffMax). A panic is such an error.
	WatchDrift(ctx context.Context, drift Drift) error
}

// Drift receives a DriftTarget's reports. Its methods are safe for
// concurrent use, never block, and cost a map insertion: call them from
// the goroutine that reads the real system's notifications.
type Drift interface {
	// Changed reports that the real state of the object with primary key
	// key may have changed.
	Changed(key index.Key)
	// ChangedPrefix reports that the real state of every object whose
	// primary key starts with prefix may have changed: a group of objects
	// that the target's notifications cannot tell apart (the rules of one
	// chain, say).
	ChangedPrefix(prefix index.Key)
	// ChangedAll reports that the real state of any object may have
	// changed: the watch started (again), or it lost notifications (a
	// socket buffer overflowed).
	ChangedAll()
}

// driftState is what the reports of a DriftTarget left for the goroutine
// running Run. Fields above mu belong to that goroutine.
type driftState struct {
	// cursor is where a check of every object (after ChangedAll) goes on:
	// after this primary key; nil when no such pass runs.
	cursor []byte
	// wake is signalled when there is something to check, or the watch's
	// health changed.
	wake chan struct{}

	mu       sync.Mutex
	keys     map[string]struct{} // reported, not yet checked
	prefixes map[string]struct{} // reported by ChangedPrefix, not yet listed
	all      bool                // ChangedAll reported, not yet started
	reports  int                 // reports since the last round, for the metrics
	watchErr error               // why the watch failed; nil while it works
	attempts int                 // consecutive failed watches
}

// driftSink is the Drift that a reconciler hands to its target.
type driftSink[Obj any] struct{ r *reconciler[Obj] }

func (s driftSink[Obj]) Changed(key index.Key) {
	r := s.r
	d := &r.drift
	if _, _, found := r.cfg.Table.Get(r.db.ReadTxn(), statedb.QueryByPrimaryKey[Obj](r.cfg.Table, key)); !found {
		return // not the reconciler's object: nothing to check, nothing to count
	}
	d.mu.Lock()
	d.reports++
	if d.keys == nil {
		d.keys = map[string]struct{}{}
	}
	d.keys[string(key)] = struct{}{}
	d.mu.Unlock()
	d.signal()
}

func (s driftSink[Obj]) ChangedPrefix(prefix index.Key) {
	d := &s.r.drift
	d.mu.Lock()
	d.reports++
	if d.prefixes == nil {
		d.prefixes = map[string]struct{}{}
	}
	d.prefixes[string(prefix)] = struct{}{}
	d.mu.Unlock()
	d.signal()
}

func (s driftSink[Obj]) ChangedAll() {
	d := &s.r.drift
	d.mu.Lock()
	d.reports++
	d.all = true
	d.watchErr, d.attempts = nil, 0
	d.mu.Unlock()
	d.signal()
}

func (d *driftState) signal() {
	select {
	case d.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// err returns why the watch failed, or nil.
func (d *driftState) err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.watchErr
}

// watchDrift runs the target's WatchDrift until ctx ends, again after its
// retry backoff whenever it fails. Run starts it and waits for it.
func (r *reconciler[Obj]) watchDrift(ctx context.Context) {
	d := &r.drift
	for {
		err := r.callWatchDrift(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = fmt.Errorf("WatchDrift returned before its context ended")
		}
		d.mu.Lock()
		d.attempts++
		d.watchErr = fmt.Errorf("watching the real system for drift: %w", err)
		wait := retryWait(d.attempts, r.cfg.RetryBackoffMin, r.cfg.RetryBackoffMax)
		d.mu.Unlock()
		r.cfg.Logger.Warn("Watching for drift failed; drift is repaired only by refresh until it works again", "error", err, "retry-in", wait)
		d.signal() // health
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// callWatchDrift calls WatchDrift, turning a panic into an error.
func (r *reconciler[Obj]) callWatchDrift(ctx context.Context) (err error) {
	defer r.recovered("watch drift", &err)
	return r.driftTarget.WatchDrift(ctx, driftSink[Obj]{r})
}

// take returns up to limit reported keys (in primary key order), whether a check of every
// object is to start, and how many reports came since the last call.
func (d *driftState) take(limit int) (keys []string, all bool, reports int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k := range d.keys {
		if len(keys) >= limit {
			break
		}
		keys = append(keys, k)
		delete(d.keys, k)
	}
	if len(d.keys) == 0 {
		d.keys = nil // a burst's map is not kept (made again at the next report)
	}
	all, reports = d.all, d.reports
	d.all, d.reports = false, 0
	slices.Sort(keys) // primary key order, as every other round
	return keys, all, reports
}

// more reports whether reports are waiting.
func (d *driftState) more() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.keys) > 0 || len(d.prefixes) > 0 || d.all
}

// idle reports whether there is nothing to do: no report waiting, none to
// count, no pass over every object going on.
func (d *driftState) idle() bool {
	if d.cursor != nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.keys) == 0 && len(d.prefixes) == 0 && !d.all && d.reports == 0
}

// expandPrefixes turns the prefixes reported into the keys of the objects
// of txn that have them.
func (r *reconciler[Obj]) expandPrefixes(txn statedb.ReadTxn) {
	d := &r.drift
	d.mu.Lock()
	prefixes := d.prefixes
	d.prefixes = nil
	d.mu.Unlock()
	if len(prefixes) == 0 {
		return
	}
	var keys []string
	for p := range prefixes {
		for obj := range r.cfg.Table.Prefix(txn, statedb.QueryByPrimaryKey[Obj](r.cfg.Table, index.Key(p))) {
			keys = append(keys, string(r.cfg.Table.PrimaryKey(obj)))
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.keys == nil {
		d.keys = map[string]struct{}{}
	}
	for _, k := range keys {
		d.keys[k] = struct{}{}
	}
}

// driftStep checks one round of the objects a DriftTarget reported: at
// most IncrementalRoundSize, the reported keys first, then the next of a
// pass over every object after ChangedAll. Failing objects reported are
// retried at once; Pending ones are the incremental rounds' business. If
// more is left, the loop is woken again, so that changes of the desired
// state and retries get their turn between rounds.
func (r *reconciler[Obj]) driftStep(ctx context.Context) {
	d := &r.drift
	if r.driftTarget == nil || d.idle() {
		return
	}
	limit := r.cfg.IncrementalRoundSize
	txn := r.db.ReadTxn()
	r.expandPrefixes(txn)
	keys, all, reports := d.take(limit)
	if all {
		// Anything may have changed: check everything, from the start,
		// and retry every failing object now.
		d.cursor = []byte{}
		r.retries.expedite(time.Now())
	}
	if len(keys) == 0 && d.cursor == nil {
		if reports > 0 {
			r.cfg.Metrics.DriftChecked(r.cfg.Name, r.tableName, reports, 0)
		}
		return
	}
	round := make([]work[Obj], 0, min(limit, len(keys)+64))
	inRound := make(map[string]bool, len(keys))
	expedited := all
	for _, key := range keys {
		obj, rev, found := r.cfg.Table.Get(txn, statedb.QueryByPrimaryKey[Obj](r.cfg.Table, index.Key(key)))
		if !found {
			continue
		}
		switch r.cfg.GetObjectStatus(obj).Kind {
		case StatusKindDone:
			round = append(round, work[Obj]{obj: obj, rev: rev, key: key, refresh: true, found: FoundByEvent})
			inRound[key] = true
		case StatusKindError:
			expedited = r.retries.expediteKey(key, time.Now()) || expedited
		}
	}
	if d.cursor != nil {
		round = r.driftPass(txn, round, inRound, limit)
	}
	r.cfg.Metrics.DriftChecked(r.cfg.Name, r.tableName, reports, len(round))
	if expedited {
		r.processRetries(ctx)
	}
	switch {
	case len(round) == 0:
	case r.planner != nil:
		r.checkRound(ctx, txn, round, false)
	default:
		// Nothing can say what differs: apply them again.
		r.processRound(ctx, txn, round, true)
	}
	if d.cursor != nil || d.more() {
		d.signal()
	}
}

// driftPass adds to round the next Done objects of the pass over every
// object, up to limit in all, and moves the cursor on (to nil at the end).
func (r *reconciler[Obj]) driftPass(txn statedb.ReadTxn, round []work[Obj], inRound map[string]bool, limit int) []work[Obj] {
	d := &r.drift
	for obj, rev := range r.cfg.Table.LowerBound(txn, statedb.QueryByPrimaryKey[Obj](r.cfg.Table, d.cursor)) {
		key := r.cfg.Table.PrimaryKey(obj)
		if len(d.cursor) > 0 && string(key) == string(d.cursor) {
			continue
		}
		if len(round) >= limit {
			return round
		}
		d.cursor = key
		if inRound[string(key)] || r.cfg.GetObjectStatus(obj).Kind != StatusKindDone {
			continue
		}
		round = append(round, work[Obj]{obj: obj, rev: rev, key: string(key), refresh: true, found: FoundByEvent})
	}
	d.cursor = nil
	return round
}
