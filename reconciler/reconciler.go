package reconciler

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/steadystate/steadystate/statedb"
)

// New validates cfg, applies the defaults and returns a reconciler that is
// usable without hive: call Run. It returns an error wrapping
// ErrInvalidConfig that lists every problem of cfg.
func New[Obj any](db *statedb.DB, cfg Config[Obj]) (Reconciler[Obj], error) {
	if db == nil {
		return nil, fmt.Errorf("%w %q: db is nil", ErrInvalidConfig, cfg.Name)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &reconciler[Obj]{
		db:        db,
		cfg:       cfg,
		tableName: cfg.Table.Name(),
		untimed:   isNop(cfg.Metrics),
		retries:   newRetryQueue[Obj](),
		terminal:  map[string]error{},
		failures:  map[string]int{},
		pruneReq:  make(chan struct{}, 1),
		progress:  make(chan struct{}),
	}
	r.batch, _ = cfg.Target.(BatchTarget[Obj])
	r.planner, _ = cfg.Target.(Planner[Obj])
	if r.planner != nil {
		r.batchPlanner, _ = cfg.Target.(BatchPlanner[Obj])
	}
	r.driftTarget, _ = cfg.Target.(DriftTarget[Obj])
	r.drift.wake = make(chan struct{}, 1)
	r.exec = newExecutor(r)
	return r, nil
}

// reconciler implements Reconciler. Fields below mu are shared with other
// goroutines; the rest belong to the goroutine running Run.
type reconciler[Obj any] struct {
	db        *statedb.DB
	cfg       Config[Obj]
	tableName string // cfg.Table.Name(), for metrics
	// untimed is set when the metrics are NopMetrics: the operations of
	// one object are not timed (two clock reads each at 1M objects were
	// 4% of a reconciler's CPU).
	untimed  bool
	roundLog roundLog         // the lines the round under way logged
	batch    BatchTarget[Obj] // nil unless the target implements it
	planner  Planner[Obj]     // nil unless the target implements it
	// batchPlanner is nil unless the target implements it (and Planner).
	batchPlanner BatchPlanner[Obj]
	driftTarget  DriftTarget[Obj] // nil unless the target implements it
	exec         *executor[Obj]   // runs the target operations

	retries  *retryQueue[Obj]
	terminal map[string]error // objects failed terminally, by primary key
	failures map[string]int   // failed updates in a row of each object in Error, by primary key
	recent   []recentFailure  // the latest failures, newest last
	pruning  pruneState
	refresh  refreshState
	drift    driftState
	health   healthState
	round    []work[Obj] // reused buffer of the current round
	// seen is the table revision the last incremental pass read up to,
	// own that of the reconciler's last status write: the revisions past
	// both are (at most) the changes of the next pass, the size its round
	// buffer is made with.
	seen, own statedb.Revision
	// roundsMade counts the round buffers made at a pass's size (for
	// tests).
	roundsMade atomic.Int64
	// peaks are the most entries terminal, failures and the retry queue
	// held at a round's end since they were made (see shrink.Map).
	peaks struct{ terminal, failures, retries int }

	pruneReq chan struct{} // Prune requests, buffered by one

	mu       sync.Mutex
	running  bool
	reached  statedb.Revision // every change up to here was attempted
	failing  int              // objects failing when reached was set
	lowest   statedb.Revision // lowest revision waiting for a retry then
	progress chan struct{}    // closed and replaced when reached moves
}

// work is one object of a round.
//
// (Its flags sit together: a round of 50,000 objects is 5 MB, not 6.4.)
type work[Obj any] struct {
	obj      Obj
	rev      statedb.Revision
	key      string // primary key; computed only when needed
	attempts int    // failed attempts so far
	err      error  // outcome of this attempt
	plan     Plan   // what the operation changed (Planner targets)
	found    FoundBy
	deleted  bool
	refresh  bool // a refresh (or the retry of one): drift it repairs is counted
	skipped  bool // the plan was empty: nothing written
	planned  bool // plan was made before the round (check.go): not planned again
}

func (r *reconciler[Obj]) Prune() {
	select {
	case r.pruneReq <- struct{}{}:
	default: // one is already pending
	}
}

func (r *reconciler[Obj]) WaitUntilReconciled(ctx context.Context, rev statedb.Revision) (statedb.Revision, error) {
	for {
		r.mu.Lock()
		reached, failing, lowest, ch := r.reached, r.failing, r.lowest, r.progress
		r.mu.Unlock()
		if reached >= rev {
			if failing > 0 {
				return reached, &NotReconciledError{Reconciler: r.cfg.Name, Failing: failing, LowestRetryRevision: lowest}
			}
			return reached, nil
		}
		select {
		case <-ctx.Done():
			return reached, ctx.Err()
		case <-ch:
		}
	}
}

// setReached records that every change up to rev was attempted.
func (r *reconciler[Obj]) setReached(rev statedb.Revision) {
	lowest := r.retries.lowestRevision()
	r.mu.Lock()
	defer r.mu.Unlock()
	if rev <= r.reached && r.failing == r.numFailing() && r.lowest == lowest {
		return
	}
	r.reached = max(r.reached, rev)
	r.failing = r.numFailing()
	r.lowest = lowest
	close(r.progress)
	r.progress = make(chan struct{})
}

// roundPause waits out what is left of MinRoundInterval since the last
// round started, so that changes arriving in a burst coalesce into one
// round (and versions replaced meanwhile are never applied).
func (r *reconciler[Obj]) roundPause(ctx context.Context, lastRound time.Time) {
	wait := r.cfg.MinRoundInterval - time.Since(lastRound)
	if wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (r *reconciler[Obj]) numFailing() int { return r.retries.len() + len(r.terminal) }

// Run reconciles until ctx is cancelled. It can run once at a time.
func (r *reconciler[Obj]) Run(ctx context.Context) error {
	r.mu.Lock()
	if r.running {
		r.mu.Unlock()
		return fmt.Errorf("reconciler %q is already running", r.cfg.Name)
	}
	r.running = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.running = false
		r.mu.Unlock()
	}()

	wtxn := r.db.WriteTxn(r.cfg.Table)
	changes, err := r.cfg.Table.Changes(wtxn)
	wtxn.Commit()
	if err != nil {
		return fmt.Errorf("reconciler %q: %w", r.cfg.Name, err)
	}
	defer changes.Close()

	r.exec.start()
	defer r.exec.stop()
	if r.driftTarget != nil {
		watchCtx, stopWatch := context.WithCancel(ctx)
		watching := make(chan struct{})
		go func() {
			defer close(watching)
			r.watchDrift(watchCtx)
		}()
		defer func() {
			stopWatch()
			<-watching
		}()
	}

	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var pruneTick <-chan time.Time
	if r.cfg.FullReconciliationInterval > 0 {
		t := time.NewTicker(r.cfg.FullReconciliationInterval)
		defer t.Stop()
		pruneTick = t.C
		// The first prune comes as soon as the table is initialized: it
		// removes what an earlier run left behind (deletes that happened
		// while nothing was running).
		r.pruning.requested = true
	}
	r.reportHealth(true)

	var lastRound time.Time // start of the last round that had work
	for {
		start := time.Now()
		watch, worked := r.incremental(ctx, changes)
		if worked {
			lastRound = start
		}
		if ctx.Err() != nil {
			break
		}
		r.processRetries(ctx)
		r.driftStep(ctx)
		initWatch := r.pruneStep(ctx)
		refreshAt := r.refreshStep(ctx)
		r.reportHealth(false)
		if ctx.Err() != nil {
			break
		}

		// Sleep until the earliest of: a retry due, a failed prune's
		// backoff over, the next refresh.
		wake, ok := r.retries.next()
		if r.pruning.requested && !r.pruning.retryAt.IsZero() && (!ok || r.pruning.retryAt.Before(wake)) {
			wake, ok = r.pruning.retryAt, true
		}
		if !refreshAt.IsZero() && (!ok || refreshAt.Before(wake)) {
			wake, ok = refreshAt, true
		}
		var timerC <-chan time.Time
		if ok {
			timer.Reset(max(time.Until(wake), 0))
			timerC = timer.C
		}
		select {
		case <-ctx.Done():
		case <-watch:
			r.roundPause(ctx, lastRound)
		case <-timerC:
		case <-initWatch:
		case <-r.exec.unstuck:
		case <-r.drift.wake:
		case <-pruneTick:
			r.pruning.requested = true
		case <-r.pruneReq:
			r.pruning.requested = true
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	if r.cfg.Health != nil {
		r.cfg.Health.Stopped("reconciler stopped")
	}
	return nil
}
