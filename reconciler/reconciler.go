package reconciler

import (
	"context"
	"fmt"
	"sync"
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
		retries:   newRetryQueue[Obj](),
		terminal:  map[string]error{},
		pruneReq:  make(chan struct{}, 1),
		progress:  make(chan struct{}),
	}
	r.batch, _ = cfg.Target.(BatchTarget[Obj])
	return r, nil
}

// reconciler implements Reconciler. Fields below mu are shared with other
// goroutines; the rest belong to the goroutine running Run.
type reconciler[Obj any] struct {
	db        *statedb.DB
	cfg       Config[Obj]
	tableName string           // cfg.Table.Name(), for metrics
	batch     BatchTarget[Obj] // nil unless the target implements it

	retries  *retryQueue[Obj]
	terminal map[string]error // objects failed terminally, by primary key
	recent   []recentFailure  // the latest failures, newest last
	full     fullState
	health   healthState
	round    []work[Obj] // reused buffer of the current round

	pruneReq chan struct{} // Prune requests, buffered by one

	mu       sync.Mutex
	running  bool
	reached  statedb.Revision // every change up to here was attempted
	failing  int              // objects failing when reached was set
	progress chan struct{}    // closed and replaced when reached moves
}

// work is one object of a round.
type work[Obj any] struct {
	obj      Obj
	rev      statedb.Revision
	deleted  bool
	key      string // primary key; computed only when needed
	attempts int    // failed attempts so far
	err      error  // outcome of this attempt
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
		reached, failing, ch := r.reached, r.failing, r.progress
		r.mu.Unlock()
		if reached >= rev {
			if failing > 0 {
				return reached, fmt.Errorf("reconciler %q: %w: %d objects failing (see their status)", r.cfg.Name, ErrNotAllReconciled, failing)
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
	r.mu.Lock()
	defer r.mu.Unlock()
	if rev <= r.reached && r.failing == r.numFailing() {
		return
	}
	r.reached = max(r.reached, rev)
	r.failing = r.numFailing()
	close(r.progress)
	r.progress = make(chan struct{})
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

	retryTimer := time.NewTimer(time.Hour)
	defer retryTimer.Stop()
	var fullTick <-chan time.Time
	if r.cfg.FullReconciliationInterval > 0 {
		t := time.NewTicker(r.cfg.FullReconciliationInterval)
		defer t.Stop()
		fullTick = t.C
		// The first full reconciliation comes as soon as the table is
		// initialized: it prunes what an earlier run left behind (deletes
		// that happened while nothing was running).
		r.full.requested = true
	}
	r.reportHealth(true)

	for {
		watch := r.incremental(ctx, changes)
		if ctx.Err() != nil {
			break
		}
		r.processRetries(ctx)
		initWatch := r.fullStep(ctx)
		r.reportHealth(false)

		if r.full.active {
			// A full reconciliation is under way: take its next chunk
			// after the incremental work, without waiting.
			if ctx.Err() != nil {
				break
			}
			continue
		}
		var retryC <-chan time.Time
		at, ok := r.retries.next()
		if r.full.requested && !r.full.retryAt.IsZero() && (!ok || r.full.retryAt.Before(at)) {
			// A failed prune waits for its own backoff: wake up for it.
			at, ok = r.full.retryAt, true
		}
		if ok {
			retryTimer.Reset(max(time.Until(at), 0))
			retryC = retryTimer.C
		}
		select {
		case <-ctx.Done():
		case <-watch:
		case <-retryC:
		case <-initWatch:
		case <-fullTick:
			r.full.requested = true
		case <-r.pruneReq:
			r.full.requested = true
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
