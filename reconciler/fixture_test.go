package reconciler_test

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
	"github.com/steadystate/steadystate/statedb"
)

// The scenario tests (scripts and Go) run from outside the package, as a
// user would, on reconcilertest's target and health. This file holds
// their desired object and a fixture with steps that read like a story.

// testObj is the desired object: a key, a value for the real system and
// the reconciliation status.
type testObj struct {
	ID     string
	Value  int
	Status reconciler.Status
}

// String names the object in the reconciler's health reports.
func (o *testObj) String() string { return fmt.Sprintf("%s=%d", o.ID, o.Value) }

func objKey(o *testObj) string { return o.ID }

func getStatus(o *testObj) reconciler.Status { return o.Status }

func setStatus(o *testObj, s reconciler.Status) *testObj { o.Status = s; return o }

func cloneObj(o *testObj) *testObj { c := *o; return &c }

var idIndex = statedb.Index[*testObj, string]{
	Name:       "id",
	FromObject: func(o *testObj) index.KeySet { return index.NewKeySet(index.String(o.ID)) },
	FromKey:    index.String,
	Unique:     true,
}

var statusIndex = reconciler.StatusIndex(getStatus)

// fixture is a table, a recording target and a reconciler between them.
type fixture struct {
	t       testing.TB
	db      *statedb.DB
	table   statedb.RWTable[*testObj]
	target  *reconcilertest.Target[*testObj]
	health  *reconcilertest.Health
	metrics *gauges
	cfg     reconciler.Config[*testObj] // adjust before start
	rec     *reconcilertest.Reconciler[*testObj]
}

// newFixture returns a fixture that is not started yet. With batch, the
// reconciler gets the target as a reconciler.BatchTarget.
func newFixture(t testing.TB, batch bool) *fixture {
	t.Helper()
	f := &fixture{
		t:       t,
		db:      statedb.New(),
		target:  reconcilertest.NewTarget(objKey),
		health:  &reconcilertest.Health{},
		metrics: &gauges{},
	}
	var err error
	f.table, err = statedb.NewTable(f.db, "objs", idIndex, statusIndex)
	if err != nil {
		t.Fatal(err)
	}
	var target reconciler.Target[*testObj] = f.target
	if batch {
		target = f.target.Batch()
	}
	f.cfg = reconciler.Config[*testObj]{
		Name:            "test",
		Table:           f.table,
		Target:          target,
		GetObjectStatus: getStatus,
		SetObjectStatus: setStatus,
		CloneObject:     cloneObj,
		RetryBackoffMin: time.Millisecond,
		RetryBackoffMax: 10 * time.Millisecond,
		Health:          f.health,
		Metrics:         f.metrics,
		Logger:          slog.New(slog.NewTextHandler(t.Output(), nil)), // shown with the test's failure
	}
	return f
}

// withPlanner gives the reconciler the target with reconciler.Planner.
func (f *fixture) withPlanner() {
	equal := func(applied, desired *testObj) bool { return applied.Value == desired.Value }
	if _, batch := f.cfg.Target.(reconciler.BatchTarget[*testObj]); batch {
		f.cfg.Target = f.target.Batch().Planner(equal)
	} else {
		f.cfg.Target = f.target.Planner(equal)
	}
}

// start runs the reconciler from f.cfg until the test ends.
func (f *fixture) start() {
	f.t.Helper()
	f.rec = reconcilertest.Start(f.t, f.db, f.cfg)
}

// insert inserts new Pending versions of objs in one transaction and
// returns the table's revision after it.
func (f *fixture) insert(objs ...*testObj) statedb.Revision {
	f.t.Helper()
	wtxn := f.db.WriteTxn(f.table)
	defer wtxn.Abort()
	for _, o := range objs {
		o.Status = reconciler.StatusPending()
		if _, _, err := f.table.Insert(wtxn, o); err != nil {
			f.t.Fatalf("insert %v: %v", o, err)
		}
	}
	return f.table.Revision(wtxn.Commit())
}

// insertN inserts objects "<prefix>0000" .. with value 1.
func (f *fixture) insertN(prefix string, n int) statedb.Revision {
	objs := make([]*testObj, n)
	for i := range objs {
		objs[i] = &testObj{ID: fmt.Sprintf("%s%04d", prefix, i), Value: 1}
	}
	return f.insert(objs...)
}

// delete deletes the keys in one transaction.
func (f *fixture) delete(keys ...string) statedb.Revision {
	f.t.Helper()
	wtxn := f.db.WriteTxn(f.table)
	defer wtxn.Abort()
	for _, k := range keys {
		if _, _, err := f.table.Delete(wtxn, &testObj{ID: k}); err != nil {
			f.t.Fatalf("delete %s: %v", k, err)
		}
	}
	return f.table.Revision(wtxn.Commit())
}

func (f *fixture) get(key string) (*testObj, bool) {
	obj, _, found := f.table.Get(f.db.ReadTxn(), idIndex.Query(key))
	return obj, found
}

// waitStatus waits until key has status kind with an error containing
// substr, and returns the object.
func (f *fixture) waitStatus(key string, kind reconciler.StatusKind, substr string) *testObj {
	f.t.Helper()
	timeout := time.NewTimer(reconcilertest.Timeout)
	defer timeout.Stop()
	for {
		txn := f.db.ReadTxn()
		obj, _, watch, found := f.table.GetWatch(txn, idIndex.Query(key))
		if found && obj.Status.Kind == kind && strings.Contains(obj.Status.Error, substr) {
			return obj
		}
		select {
		case <-watch:
		case <-timeout.C:
			f.t.Fatalf("timed out waiting for %s to be %s %q; it is %v (found %v)", key, kind, substr, obj, found)
		}
	}
}

// countStatus returns how many objects have status kind.
func (f *fixture) countStatus(kind reconciler.StatusKind) int {
	n := 0
	for range f.table.List(f.db.ReadTxn(), statusIndex.Query(kind)) {
		n++
	}
	return n
}

// mustReconcile waits until every change so far was attempted and none
// failed.
func (f *fixture) mustReconcile() {
	f.t.Helper()
	if err := f.rec.Reconciled(); err != nil {
		f.t.Fatalf("Reconciled: %v", err)
	}
}

// gauges records the reconciler's gauges and counters that the tests
// check; durations are covered by the Prometheus tests.
type gauges struct {
	reconciler.NopMetrics // what the tests do not check

	mu       sync.Mutex
	errors   int
	retries  int
	drift    int
	pruned   int
	skipped  int
	refresh  int // RefreshQueue
	busyMax  int // most WorkersBusy seen
	stuck    int
	plans    int
	prunes   int
	fullDone int
	reports  int // DriftChecked
	checked  int
	checks   int // rounds
}

func (g *gauges) locked(f func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f()
}

func (g *gauges) OperationDone(string, string, reconciler.Operation, time.Duration, int, int) {}
func (g *gauges) PruneRoundDone(string, string, time.Duration, error) {
	g.locked(func() { g.fullDone++ })
}
func (g *gauges) PruneDone(string, string, time.Duration, error) { g.locked(func() { g.prunes++ }) }
func (g *gauges) PlanDone(string, string, reconciler.Operation, time.Duration, error) {
	g.locked(func() { g.plans++ })
}
func (g *gauges) DriftRepaired(_, _ string, n int) { g.locked(func() { g.drift += n }) }
func (g *gauges) Pruned(_, _ string, n int)        { g.locked(func() { g.pruned += n }) }
func (g *gauges) DriftChecked(_, _ string, reports, checked int) {
	g.locked(func() {
		g.reports += reports
		g.checked += checked
		if checked > 0 {
			g.checks++
		}
	})
}
func (g *gauges) Skipped(_, _ string, _ reconciler.Operation, n int) {
	g.locked(func() { g.skipped += n })
}
func (g *gauges) Errors(_, _ string, n int)        { g.locked(func() { g.errors = n }) }
func (g *gauges) QueuedRetries(_, _ string, n int) { g.locked(func() { g.retries = n }) }
func (g *gauges) RefreshQueue(_, _ string, n int)  { g.locked(func() { g.refresh = n }) }
func (g *gauges) WorkersBusy(_, _ string, n int)   { g.locked(func() { g.busyMax = max(g.busyMax, n) }) }
func (g *gauges) StuckOperations(_, _ string, n int) {
	g.locked(func() { g.stuck = n })
}

// read returns the errors and queued-retries gauges.
func (g *gauges) read() (errors, retries int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.errors, g.retries
}
