package reconciler

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/steadystate/steadystate/statedb"
)

// The executor runs the target operations of a round on up to
// Config.Workers worker goroutines, while the goroutine running Run waits
// for the round and watches the clock.
//
// Ordering. A round holds each primary key at most once (the change feed
// yields the net change of a key; a retry round is built from the retry
// queue, which holds one entry per key), and the rounds run one after the
// other: the next round starts only when every operation of this one has
// returned or been abandoned. So no two operations on one key ever run at
// once, the changes of a key are applied in the order of the rounds that
// carry them, and a delete is never overtaken by an older update of its key.
//
// Abandonment. Every operation's context ends within OperationTimeout of
// its start. An operation still running opGrace after its full
// OperationTimeout ignores its context: the executor abandons it. Its
// objects fail with ErrOperationAbandoned (and are retried), a fresh worker
// takes over the rest of the round, and its keys stay busy until the call
// returns at last: until then every operation on those keys fails with
// ErrKeyBusy before it starts (and is retried), and no prune runs. Health
// names the stuck operation. The abandoned goroutine is not stopped (Go
// cannot stop a goroutine): it ends when the target returns, drops its
// result and frees the keys; if the target never returns, it stays blocked
// for the life of the process. Run does not wait for it.
//
// The executor lives as long as its reconciler: the stuck operations of one
// Run still block their keys in the next. Each Run starts (start) and stops
// (stop) its own pool of workers.
type executor[Obj any] struct {
	r    *reconciler[Obj]
	jobs chan *job[Obj] // to the pool's workers, one channel per Run
	live sync.WaitGroup // workers not abandoned

	mu    sync.Mutex
	pool  []*worker          // live workers (abandoned ones leave it)
	stuck map[string]stuckOp // by key: abandoned operations still running
	// unstuck is signalled when an abandoned operation returns.
	unstuck chan struct{}
}

// stuckOp is an abandoned operation that has not returned yet.
type stuckOp struct {
	op    Operation
	name  string // how the object is shown
	since time.Time
}

// stuckPruneKey is the key under which a stuck Prune is recorded.
const stuckPruneKey = "\x00prune"

// worker is one worker goroutine; its fields are guarded by executor.mu.
type worker struct {
	unit      int       // the unit it runs, -1 when none
	start     time.Time // when it started the unit
	abandoned bool
	keys      []string  // the stuck keys it frees when it returns
	op        Operation // of the unit it runs
}

// job is the work of one round: n units (an object, a batch or a prune),
// pulled in order by the workers.
type job[Obj any] struct {
	ctx   context.Context
	txn   statedb.ReadTxn
	n     int
	round []work[Obj]
	// spans are the batch units: round[order[lo:hi]]; nil when each unit
	// is one object of the round.
	spans []span
	order []int
	op    Operation // of the updates: OpUpdate or OpRefresh
	prune bool      // the one unit is a prune
	plan  bool      // the units plan updates, and change nothing (check.go)
	// pruneOut is the outcome of the prune.
	pruneOut unitOut[Obj]

	next      atomic.Int64
	remaining int // guarded by executor.mu
	done      chan struct{}
}

// span is a batch unit: the objects round[order[lo:hi]], all deletes or
// all updates.
type span struct {
	lo, hi  int
	deleted bool
}

// unitIn is what a worker needs to run a unit, copied from the round under
// executor.mu: once a unit is abandoned the round goes on without it, so
// its worker must not read the round any more.
type unitIn[Obj any] struct {
	obj     Obj
	deleted bool
	op      Operation         // the unit's operation
	busy    error             // the key is stuck: fail with this, call nothing
	batch   []BatchEntry[Obj] // a batch unit
	plans   []PlanEntry[Obj]  // a batch unit of a plan job
	planned bool              // the object was planned already: plan is its plan
	plan    Plan
}

// unitOut is the outcome of a unit.
type unitOut[Obj any] struct {
	err     error
	skipped bool              // the plan was empty: nothing was written
	plan    Plan              // the plan that was applied (Planner targets)
	batch   []BatchEntry[Obj] // a batch unit's entries with their results
	plans   []PlanEntry[Obj]  // a plan job's batch unit's entries with their plans
}

// opGrace is how long past OperationTimeout an operation may take to
// notice that its context ended before it is abandoned.
func opGrace(timeout time.Duration) time.Duration { return max(timeout/10, time.Millisecond) }

// shutdownGrace is how long Run waits, once its context is cancelled, for
// the running operations to return before it leaves them to themselves.
func shutdownGrace(timeout time.Duration) time.Duration { return min(opGrace(timeout), time.Second) }

func newExecutor[Obj any](r *reconciler[Obj]) *executor[Obj] {
	return &executor[Obj]{
		r:       r,
		stuck:   map[string]stuckOp{},
		unstuck: make(chan struct{}, 1),
	}
}

// start readies the executor for a Run.
func (ex *executor[Obj]) start() {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	ex.jobs = make(chan *job[Obj], 2*ex.r.cfg.Workers)
	ex.pool = nil
}

// stop ends the idle workers of the Run and waits for them. Workers still
// running an operation were abandoned by execute when its context ended.
func (ex *executor[Obj]) stop() {
	ex.mu.Lock()
	jobs := ex.jobs
	ex.mu.Unlock()
	close(jobs)
	ex.live.Wait()
}

// numStuck returns how many abandoned operations have not returned.
func (ex *executor[Obj]) numStuck() int {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return len(ex.stuck)
}

// stuckOps describes the stuck operations, sorted.
func (ex *executor[Obj]) stuckOps() []string {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	var out []string
	for _, s := range ex.stuck {
		out = append(out, fmt.Sprintf("%s of %s stuck since %s", s.op, s.name, s.since.Format(time.RFC3339)))
	}
	slices.Sort(out)
	return out
}

// execute runs j and returns when every unit has returned or was abandoned,
// or when j.ctx ends (the units still running are then abandoned).
func (ex *executor[Obj]) execute(j *job[Obj]) {
	if j.n == 0 {
		return
	}
	r := ex.r
	j.remaining = j.n
	j.done = make(chan struct{})
	helpers := min(r.cfg.Workers, j.n)
	ex.mu.Lock()
	for len(ex.pool) < helpers {
		ex.spawnLocked()
	}
	ex.mu.Unlock()
	r.cfg.Metrics.WorkersBusy(r.cfg.Name, r.tableName, helpers)
	defer r.cfg.Metrics.WorkersBusy(r.cfg.Name, r.tableName, 0)
	for range helpers {
		ex.jobs <- j
	}
	limit := r.cfg.OperationTimeout + opGrace(r.cfg.OperationTimeout)
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		select {
		case <-j.done:
			return
		case <-j.ctx.Done():
			// Shutting down: the operations' contexts are cancelled. Give
			// them a moment to return, then leave what still runs to
			// itself.
			grace := time.NewTimer(shutdownGrace(r.cfg.OperationTimeout))
			select {
			case <-j.done:
			case <-grace.C:
			}
			grace.Stop()
			ex.mu.Lock()
			for _, w := range ex.pool {
				if w.unit >= 0 && !w.abandoned {
					w.abandoned = true
					ex.live.Done()
				}
			}
			ex.mu.Unlock()
			return
		case <-timer.C:
			next, respawned := ex.abandonOverdue(j, limit)
			for range respawned {
				ex.jobs <- j
			}
			timer.Reset(next)
		}
	}
}

// abandonOverdue abandons the units of j that have run longer than limit,
// starting a fresh worker for each, and returns when to look again and how
// many workers it started (the caller hands them j, outside the lock).
func (ex *executor[Obj]) abandonOverdue(j *job[Obj], limit time.Duration) (time.Duration, int) {
	r := ex.r
	now := time.Now()
	ex.mu.Lock()
	defer ex.mu.Unlock()
	next, respawned := limit, 0
	for _, w := range slices.Clone(ex.pool) {
		if w.unit < 0 {
			continue
		}
		age := now.Sub(w.start)
		if age < limit {
			next = min(next, limit-age)
			continue
		}
		w.abandoned = true
		ex.live.Done()
		ex.pool = slices.DeleteFunc(ex.pool, func(p *worker) bool { return p == w })
		err := fmt.Errorf("%w: %s did not return %v after its context ended (OperationTimeout %v); no further operation on the object until it does",
			ErrOperationAbandoned, w.op, (age - r.cfg.OperationTimeout).Round(time.Millisecond), r.cfg.OperationTimeout)
		for _, i := range j.objects(w.unit) {
			key, name := stuckPruneKey, "the table's leftovers"
			if i >= 0 {
				wk := &j.round[i]
				key, name = r.keyOf(wk), describe(r.cfg.Table, wk.obj)
				wk.err = err
			} else {
				j.pruneOut.err = err
			}
			ex.stuck[key] = stuckOp{op: w.op, name: name, since: w.start}
			w.keys = append(w.keys, key)
		}
		r.cfg.Logger.Error("Target operation abandoned", "operation", w.op, "error", err)
		ex.finishLocked(j)
		ex.spawnLocked()
		respawned++
	}
	r.cfg.Metrics.StuckOperations(r.cfg.Name, r.tableName, len(ex.stuck))
	return max(next, time.Millisecond), respawned
}

// spawnLocked starts a worker goroutine of the current Run.
func (ex *executor[Obj]) spawnLocked() {
	w := &worker{unit: -1}
	ex.pool = append(ex.pool, w)
	ex.live.Add(1)
	go ex.loop(w, ex.jobs)
}

// loop is a worker goroutine: it runs the units of the jobs it is handed.
func (ex *executor[Obj]) loop(w *worker, jobs <-chan *job[Obj]) {
	r := ex.r
	oc := opContext{timeout: r.cfg.OperationTimeout}
	defer oc.stop()
	for j := range jobs {
		if oc.parent != j.ctx {
			oc.stop()
			oc = opContext{parent: j.ctx, timeout: r.cfg.OperationTimeout}
		}
		for j.ctx.Err() == nil {
			i := int(j.next.Add(1) - 1)
			if i >= j.n {
				break
			}
			ex.mu.Lock()
			w.unit, w.start = i, time.Now()
			in := ex.takeLocked(j, i)
			w.op = in.op
			ex.mu.Unlock()

			out := r.runUnit(oc.get(), j, in)

			ex.mu.Lock()
			if w.abandoned {
				// Too late: the round went on without this unit. Free its
				// keys and end this goroutine (execute already counted it
				// out of ex.live).
				for _, k := range w.keys {
					delete(ex.stuck, k)
				}
				r.cfg.Metrics.StuckOperations(r.cfg.Name, r.tableName, len(ex.stuck))
				ex.mu.Unlock()
				r.cfg.Logger.Info("Abandoned target operation returned", "operation", in.op, "error", out.err)
				select {
				case ex.unstuck <- struct{}{}:
				default:
				}
				return
			}
			w.unit = -1
			ex.storeLocked(j, i, out)
			ex.finishLocked(j)
			ex.mu.Unlock()
		}
	}
	ex.live.Done()
}

func (ex *executor[Obj]) finishLocked(j *job[Obj]) {
	j.remaining--
	if j.remaining == 0 {
		close(j.done)
	}
}

// objects returns the round indexes of unit's objects; -1 stands for the
// prune.
func (j *job[Obj]) objects(unit int) []int {
	switch {
	case j.prune:
		return []int{-1}
	case j.spans != nil:
		s := j.spans[unit]
		return j.order[s.lo:s.hi]
	default:
		return []int{unit}
	}
}

// opOf returns the operation of unit.
func (j *job[Obj]) opOf(unit int) Operation {
	switch {
	case j.prune:
		return OpPrune
	case j.spans != nil && j.spans[unit].deleted, j.spans == nil && j.round[unit].deleted:
		return OpDelete
	}
	return j.op
}

// takeLocked copies what unit needs from the round.
func (ex *executor[Obj]) takeLocked(j *job[Obj], unit int) unitIn[Obj] {
	r := ex.r
	// A key is busy while its own abandoned operation runs, and every key
	// is while an abandoned Prune runs: it would remove what an operation
	// applied meanwhile (from its old snapshot of the desired objects).
	busy := func(key string) error {
		if len(ex.stuck) == 0 {
			return nil
		}
		s, ok := ex.stuck[key]
		if !ok {
			s, ok = ex.stuck[stuckPruneKey]
		}
		if ok {
			return fmt.Errorf("%w (%s of %s since %s)", ErrKeyBusy, s.op, s.name, s.since.Format(time.RFC3339))
		}
		return nil
	}
	op := j.opOf(unit)
	switch {
	case j.prune:
		return unitIn[Obj]{op: op, busy: busy(stuckPruneKey)}
	case j.plan && j.spans != nil:
		s := j.spans[unit]
		plans := make([]PlanEntry[Obj], 0, s.hi-s.lo)
		for _, i := range j.order[s.lo:s.hi] {
			w := &j.round[i]
			e := PlanEntry[Obj]{Object: w.obj, Revision: w.rev}
			if len(ex.stuck) > 0 {
				e.Result = busy(r.keyOf(w))
			}
			plans = append(plans, e)
		}
		return unitIn[Obj]{op: op, plans: plans}
	case j.spans != nil:
		s := j.spans[unit]
		batch := make([]BatchEntry[Obj], 0, s.hi-s.lo)
		for _, i := range j.order[s.lo:s.hi] {
			w := &j.round[i]
			e := BatchEntry[Obj]{Object: w.obj, Revision: w.rev}
			if len(ex.stuck) > 0 {
				// Busy entries fail before the batch; the target sees the
				// rest.
				e.Result = busy(r.keyOf(w))
			}
			batch = append(batch, e)
		}
		return unitIn[Obj]{op: op, deleted: s.deleted, batch: batch}
	default:
		w := &j.round[unit]
		in := unitIn[Obj]{op: op, obj: w.obj, deleted: w.deleted, planned: w.planned, plan: w.plan}
		if len(ex.stuck) > 0 {
			in.busy = busy(r.keyOf(w))
		}
		return in
	}
}

// storeLocked records unit's outcome in the round.
func (ex *executor[Obj]) storeLocked(j *job[Obj], unit int, out unitOut[Obj]) {
	switch {
	case j.prune:
		j.pruneOut = out
	case j.plan && j.spans != nil:
		for k, i := range j.objects(unit) {
			j.round[i].plan, j.round[i].err = out.plans[k].Plan, out.plans[k].Result
		}
	case j.spans != nil:
		for k, i := range j.objects(unit) {
			j.round[i].err = out.batch[k].Result
		}
	default:
		w := &j.round[unit]
		w.err, w.skipped, w.plan = out.err, out.skipped, out.plan
	}
}
