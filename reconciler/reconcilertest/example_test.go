package reconcilertest_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
	"github.com/steadystate/steadystate/statedb"
)

// Route is the desired object of the examples and tests: a route to a
// prefix via a gateway.
type Route struct {
	Prefix, Via string
	Status      reconciler.Status
}

func routeKey(r *Route) string { return r.Prefix }

var routePrefix = statedb.Index[*Route, string]{
	Name:       "prefix",
	FromObject: func(r *Route) index.KeySet { return index.NewKeySet(index.String(r.Prefix)) },
	FromKey:    index.String,
	Unique:     true,
}

// routesConfig is a reconciler config for table and target with retries
// after a millisecond.
func routesConfig(table statedb.RWTable[*Route], target reconciler.Target[*Route]) reconciler.Config[*Route] {
	return reconciler.Config[*Route]{
		Name:            "routes",
		Table:           table,
		Target:          target,
		GetObjectStatus: func(r *Route) reconciler.Status { return r.Status },
		SetObjectStatus: func(r *Route, s reconciler.Status) *Route { r.Status = s; return r },
		CloneObject:     func(r *Route) *Route { c := *r; return &c },
		RetryBackoffMin: time.Millisecond,
		RetryBackoffMax: time.Millisecond,
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// newRoutes returns a db with an empty routes table.
func newRoutes(tb testing.TB) (*statedb.DB, statedb.RWTable[*Route]) {
	tb.Helper()
	db := statedb.New()
	table, err := statedb.NewTable(db, "routes", routePrefix)
	if err != nil {
		tb.Fatal(err)
	}
	return db, table
}

// insert writes routes as Pending in one transaction.
func insert(db *statedb.DB, table statedb.RWTable[*Route], routes ...*Route) {
	wtxn := db.WriteTxn(table)
	for _, r := range routes {
		r.Status = reconciler.StatusPending()
		table.Insert(wtxn, r)
	}
	wtxn.Commit()
}

// A reconciler in the background of a test, with a target that records
// what the reconciler did to it.
func ExampleStart() {
	t := new(testing.T) // stands for the test's t: an example has none
	db, table := newRoutes(t)
	target := reconcilertest.NewTarget(routeKey)
	r := reconcilertest.Start(t, db, routesConfig(table, target))
	defer r.Stop() // also registered with t.Cleanup

	insert(db, table, &Route{Prefix: "10.0.0.0/8", Via: "eth0"}, &Route{Prefix: "192.168.0.0/16", Via: "eth1"})
	if err := r.Reconciled(); err != nil {
		fmt.Println(err)
	}
	fmt.Println(target.Ops())
	fmt.Println(len(target.State()), "routes in the real system")
	// Output:
	// [update(10.0.0.0/8) update(192.168.0.0/16)]
	// 2 routes in the real system
}

// A key that fails twice, then succeeds: the reconciler retries it on its
// own backoff while the other object is applied at once.
func ExampleTarget_Inject() {
	t := new(testing.T)
	db, table := newRoutes(t)
	target := reconcilertest.NewTarget(routeKey)
	target.Inject("10.0.0.0/8", reconcilertest.Fault{Times: 2})
	r := reconcilertest.Start(t, db, routesConfig(table, target))
	defer r.Stop()

	insert(db, table, &Route{Prefix: "10.0.0.0/8", Via: "eth0"}, &Route{Prefix: "192.168.0.0/16", Via: "eth1"})
	err := r.Reconciled()
	fmt.Println(errors.Is(err, reconciler.ErrNotAllReconciled))

	// Wait for the retries: four operations in all.
	for _, op := range target.WaitForOps(t, 4) {
		fmt.Println(op, op.Err)
	}
	// Output:
	// true
	// update(10.0.0.0/8) injected failure of 10.0.0.0/8
	// update(192.168.0.0/16) <nil>
	// update(10.0.0.0/8) injected failure of 10.0.0.0/8
	// update(10.0.0.0/8) <nil>
}

// An operation blocked until the test releases it: the reconciler's
// context deadline (OperationTimeout) or shutdown would also end it.
func ExampleFault_block() {
	t := new(testing.T)
	db, table := newRoutes(t)
	target := reconcilertest.NewTarget(routeKey)
	release := target.Inject("10.0.0.0/8", reconcilertest.Fault{Block: true})
	r := reconcilertest.Start(t, db, routesConfig(table, target))
	defer r.Stop()

	insert(db, table, &Route{Prefix: "10.0.0.0/8", Via: "eth0"})
	target.WaitForBlocked(t, 1)
	fmt.Println("in flight:", target.Ops())
	release()
	if err := r.Reconciled(); err != nil {
		fmt.Println(err)
	}
	fmt.Println("applied:", target.State()["10.0.0.0/8"].Via)
	// Output:
	// in flight: [update(10.0.0.0/8)]
	// applied: eth0
}

// A recorded health, waited for by level and reason.
func ExampleHealth() {
	t := new(testing.T)
	db, table := newRoutes(t)
	target := reconcilertest.NewTarget(routeKey)
	target.Inject("10.0.0.0/8", reconcilertest.Fault{Terminal: true})
	var health reconcilertest.Health
	cfg := routesConfig(table, target)
	cfg.Health = &health
	r := reconcilertest.Start(t, db, cfg)

	insert(db, table, &Route{Prefix: "10.0.0.0/8", Via: "eth0"})
	report := health.WaitFor(t, reconcilertest.LevelDegraded, "1 of 1 objects failing")
	fmt.Println(report.Level, errors.Is(report.Err, reconcilertest.ErrInjected), reconciler.IsTerminal(report.Err))
	r.Stop()
	last, _ := health.Last()
	fmt.Println(last.Level)
	// Output:
	// Degraded true true
	// Stopped
}
