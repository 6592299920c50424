package reconcilertest_test

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
)

// Start runs the reconciler until Stop, which may be called again and
// leaves no goroutine behind (goleak in TestMain); the embedded
// reconciler.Reconciler is the one running.
func TestStart(t *testing.T) {
	db, table := newRoutes(t)
	target := reconcilertest.NewTarget(routeKey)
	r := reconcilertest.Start(t, db, routesConfig(table, target))

	insert(db, table, &Route{Prefix: "a"})
	if err := r.Reconciled(); err != nil {
		t.Fatalf("Reconciled: %v", err)
	}
	rev := table.Revision(db.ReadTxn())
	if got, err := r.WaitUntilReconciled(t.Context(), rev); err != nil || got < rev {
		t.Fatalf("WaitUntilReconciled(%d) = %d, %v", rev, got, err)
	}
	if obj, _, _ := table.Get(db.ReadTxn(), routePrefix.Query("a")); obj.Status.Kind != reconciler.StatusKindDone {
		t.Fatalf("a is %v after Reconciled", obj.Status)
	}
	select {
	case <-r.Stopped():
		t.Fatal("Stopped is closed while the reconciler runs")
	default:
	}
	r.Stop()
	r.Stop()
	<-r.Stopped()
}

// Reconciled reports failing objects with ErrNotAllReconciled.
func TestReconciledFailing(t *testing.T) {
	db, table := newRoutes(t)
	target := reconcilertest.NewTarget(routeKey)
	target.Inject("a", reconcilertest.Fault{Terminal: true})
	r := reconcilertest.Start(t, db, routesConfig(table, target))
	insert(db, table, &Route{Prefix: "a"}, &Route{Prefix: "b"})
	if err := r.Reconciled(); !errors.Is(err, reconciler.ErrNotAllReconciled) {
		t.Fatalf("Reconciled: %v, want ErrNotAllReconciled", err)
	}
}

// The helpers fail the test, and say why, when what they wait for does not
// come: a bad config, a reconciler that never gets there or has stopped,
// operations that never come. (In a synctest bubble Timeout passes at
// once.)
func TestFailures(t *testing.T) {
	tests := []struct {
		name string
		body func(t testing.TB)
		want string
	}{
		{"bad config", func(t testing.TB) {
			db, table := newRoutes(t)
			cfg := routesConfig(table, reconcilertest.NewTarget(routeKey))
			cfg.Name = "Not A Name"
			reconcilertest.Start(t, db, cfg)
		}, "reconcilertest.Start: invalid reconciler config"},
		{"never reconciled", func(t testing.TB) {
			db, table := newRoutes(t)
			target := reconcilertest.NewTarget(routeKey)
			defer target.Inject("a", reconcilertest.Fault{Block: true})()
			cfg := routesConfig(table, target)
			cfg.OperationTimeout = time.Hour
			r := reconcilertest.Start(t, db, cfg)
			defer r.Stop()
			insert(db, table, &Route{Prefix: "a"})
			r.Reconciled()
		}, "did not reach revision"},
		{"stopped", func(t testing.TB) {
			db, table := newRoutes(t)
			r := reconcilertest.Start(t, db, routesConfig(table, reconcilertest.NewTarget(routeKey)))
			r.Stop()
			insert(db, table, &Route{Prefix: "a"})
			r.Reconciled()
		}, "the reconciler stopped at revision"},
		{"no operations", func(t testing.TB) {
			reconcilertest.NewTarget(routeKey).WaitForOps(t, 1)
		}, "timed out after 30s waiting for 1 target operations; saw 0 operations"},
		{"not blocked", func(t testing.TB) {
			reconcilertest.NewTarget(routeKey).WaitForBlocked(t, 1)
		}, "waiting for 1 blocked target operations"},
		{"other state", func(t testing.TB) {
			target := reconcilertest.NewTarget(routeKey)
			target.SetState("b", &Route{Prefix: "b"})
			target.WaitForState(t, map[string]*Route{"a": {Prefix: "a"}}, func(a, b *Route) bool { return *a == *b })
		}, "waiting for the real system to hold 1 objects [a]; saw 0 operations [], 0 blocked, real system [b]"},
		{"no health report", func(t testing.TB) {
			var h reconcilertest.Health
			h.OK("3 objects reconciled")
			h.WaitFor(t, reconcilertest.LevelDegraded, "")
		}, `waiting for a health report Degraded containing ""; saw 1 reports, the latest ["OK: 3 objects reconciled"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				failures := (&fakeTB{TB: t}).run(tt.body)
				if len(failures) != 1 || !strings.Contains(failures[0], tt.want) {
					t.Fatalf("failures %q, want one containing %q", failures, tt.want)
				}
			})
		})
	}
}
