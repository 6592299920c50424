package reconciler_test

import (
	"context"
	"fmt"
	"iter"
	"sync"
	"testing"
	"time"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
	"github.com/steadystate/steadystate/statedb"
)

// A flood of reports (every object removed from the real system and
// reported many times, from several goroutines at once, as a script
// deleting every route would make the kernel do) is coalesced: every object
// is repaired exactly once, in a few rounds of batch plans, and the
// reconciler then goes idle (synctest.Wait returns: no goroutine of the
// test spins).
func TestDriftFlood(t *testing.T) {
	for _, workers := range []int{1, 4} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			inBubble(t, func(t *testing.T) {
				const n, repeats, reporters = 1000, 5, 4
				f := newFixture(t, true)
				f.cfg.Workers = workers
				f.target.ReportsDrift()
				f.withPlanner()
				f.start()
				f.insertN("o", n)
				settle()
				f.mustReconcile()
				updates := f.target.Count(reconciler.OpUpdate, "")
				plans := f.target.Plans()

				var wg sync.WaitGroup
				for g := range reporters {
					wg.Go(func() {
						for r := range repeats {
							for i := g; i < n; i += reporters {
								key := fmt.Sprintf("o%04d", i)
								if r == 0 {
									f.target.RemoveState(key)
								}
								f.target.ReportDrift(index.String(key))
							}
						}
					})
				}
				wg.Wait()
				settle()

				if got := len(f.target.State()); got != n {
					t.Fatalf("the real system holds %d objects after the repairs, want %d", got, n)
				}
				if got := f.target.Count(reconciler.OpUpdate, "") - updates; got != n {
					t.Errorf("%d Updates for %d objects removed: want each repaired exactly once", got, n)
				}
				m := f.metrics
				m.mu.Lock()
				drift, reports, checked, checks := m.drift, m.reports, m.checked, m.checks
				m.mu.Unlock()
				batchPlans := f.target.Plans() - plans
				t.Logf("%d reports, %d objects checked in %d rounds, %d batch plans, %d repaired", reports, checked, checks, batchPlans, drift)
				if drift != n {
					t.Errorf("drift repaired %d, want %d", drift, n)
				}
				if reports != n*repeats+1 { // and the watch's first ChangedAll
					t.Errorf("%d reports counted, want %d", reports, n*repeats+1)
				}
				if checked > reports-1 || checked < n {
					t.Errorf("%d objects checked for %d reports of %d objects", checked, reports-1, n)
				}
				// Rounds take what came meanwhile: at most one round per
				// IncrementalRoundSize of checks, plus one per report that
				// came alone; far fewer than one per report.
				if checks > checked/2 && checks > 4*repeats*reporters {
					t.Errorf("%d check rounds for %d checks: reports are not coalesced", checks, checked)
				}
				if batchPlans > checks*workers {
					t.Errorf("%d batch plans for %d rounds with %d workers: want at most one per worker and round", batchPlans, checks, workers)
				}
				for k := range f.target.State() {
					if obj, _ := f.get(k); obj.Status.Kind != reconciler.StatusKindDone {
						t.Fatalf("%s is %v", k, obj.Status)
					}
				}
			})
		})
	}
}

// A round of checks with a BatchPlanner is one batch plan per worker, and
// its repairs one UpdateBatch per worker: the real system is read once per
// batch, never once per object.
func TestDriftBatchRounds(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		const n, workers = 12, 3
		f := newFixture(t, true)
		f.cfg.Workers = workers
		f.target.ReportsDrift()
		f.withPlanner()
		f.start()
		f.insertN("o", n)
		settle()
		f.mustReconcile()
		plans, batches := f.target.Plans(), len(f.target.Batches())
		for i := range n {
			f.target.SetState(fmt.Sprintf("o%04d", i), &testObj{ID: fmt.Sprintf("o%04d", i), Value: 2})
		}
		f.target.ReportAllDrift()
		settle()
		if got := f.target.Plans() - plans; got != workers {
			t.Errorf("%d batch plans for one round of %d objects on %d workers, want %d", got, n, workers, workers)
		}
		if got := len(f.target.Batches()) - batches; got != workers {
			t.Errorf("%d UpdateBatch calls for the round's repairs, want %d: %v", got, workers, f.target.Batches()[batches:])
		}
		for k, o := range f.target.State() {
			if o.Value != 1 {
				t.Errorf("%s = %d after the repair, want 1", k, o.Value)
			}
		}
	})
}

// With two reconcilers on one table (StatusSet), a drift check of one
// marks and repairs only its own member: the other makes no Update.
func TestDriftStatusSet(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		const n = 20
		db := statedb.New()
		table, err := statedb.NewTable(db, "multi", multiID)
		if err != nil {
			t.Fatal(err)
		}
		kernel, bgp := reconcilertest.NewTarget(multiKey), reconcilertest.NewTarget(multiKey)
		kernel.ReportsDrift()
		equal := func(a, b *multiObj) bool { return a.Value == b.Value }
		cfgK, cfgB := multiConfig("kernel", table, kernel.Planner(equal)), multiConfig("bgp", table, bgp)
		log := &reconciler.RepairLog{}
		cfgK.OnRepair = log.Add
		reconcilertest.Start(t, db, cfgK)
		reconcilertest.Start(t, db, cfgB)
		writeVersion(t, db, table, n, 1)
		settle()

		kernel.RemoveState("o0003")
		kernel.SetState("o0007", &multiObj{ID: "o0007", Value: 9})
		kernel.ReportDrift(index.String("o0003"), index.String("o0007"), index.String("o0010"))
		settle()
		if got := kernel.Count(reconciler.OpUpdate, ""); got != n+2 {
			t.Errorf("kernel: %d Updates, want %d (the two repairs)", got, n+2)
		}
		if got := bgp.Count(reconciler.OpUpdate, ""); got != n {
			t.Errorf("bgp: %d Updates, want %d: another reconciler's repair must not make it work", got, n)
		}
		for obj := range table.All(db.ReadTxn()) {
			for _, name := range []string{"kernel", "bgp"} {
				if st := obj.Status.Get(name); st.Kind != reconciler.StatusKindDone {
					t.Errorf("%s: %s is %v", obj.ID, name, st)
				}
			}
		}
		latest, total := log.Latest()
		if total != 2 || len(latest) != 2 || latest[0].Object != `"o0007"` || latest[1].Object != `"o0003"` ||
			latest[0].FoundBy != reconciler.FoundByEvent || latest[0].Changes.String() != "change o0007\n" {
			t.Errorf("repairs %d %+v, want o0007 (change) and o0003 (add), found by event", total, latest)
		}
	})
}

// prunePlanner plans a prune that removes one leftover and puts one
// desired object back (Repair), as the iptables target's does.
type prunePlanner struct {
	reconcilertest.PlannerTarget[*testObj]
}

func (p prunePlanner) PlanPrune(ctx context.Context, txn statedb.ReadTxn, desired iter.Seq2[*testObj, statedb.Revision]) (reconciler.Plan, error) {
	return reconciler.Plan{
		{Action: reconciler.ActionRemove, Object: "stray"},
		{Action: reconciler.ActionAdd, Object: "a", Repair: true},
	}, nil
}

// What a prune puts back is drift repaired (found by prune); only what it
// removes is counted as pruned.
func TestPruneRepairs(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		f := newFixture(t, false)
		f.cfg.Target = prunePlanner{f.target.Planner(func(a, b *testObj) bool { return a.Value == b.Value })}
		log := &reconciler.RepairLog{}
		f.cfg.OnRepair = log.Add
		f.start()
		f.insert(&testObj{ID: "a", Value: 1})
		settle()
		f.rec.Prune()
		settle()
		m := f.metrics
		m.mu.Lock()
		pruned, drift := m.pruned, m.drift
		m.mu.Unlock()
		if pruned != 1 || drift != 1 {
			t.Errorf("pruned %d, drift repaired %d; want 1 and 1", pruned, drift)
		}
		latest, _ := log.Latest()
		if len(latest) != 1 || latest[0].Object != "a" || latest[0].FoundBy != reconciler.FoundByPrune {
			t.Errorf("repairs %+v, want a found by prune", latest)
		}
	})
}

// A RepairLog keeps the latest Size repairs, newest first, and counts all.
func TestRepairLog(t *testing.T) {
	l := &reconciler.RepairLog{Size: 3}
	for i := range 7 {
		l.Add(reconciler.Repair{Object: fmt.Sprint(i), At: time.Unix(int64(i), 0)})
	}
	latest, total := l.Latest()
	if total != 7 || len(latest) != 3 || latest[0].Object != "6" || latest[2].Object != "4" {
		t.Fatalf("Latest = %v, %d; want 6 5 4 of 7", latest, total)
	}
	var zero reconciler.RepairLog
	for range reconciler.DefaultRepairLogSize + 2 {
		zero.Add(reconciler.Repair{})
	}
	if latest, total := zero.Latest(); len(latest) != reconciler.DefaultRepairLogSize || total != reconciler.DefaultRepairLogSize+2 {
		t.Fatalf("zero RepairLog kept %d of %d, want %d", len(latest), total, reconciler.DefaultRepairLogSize)
	}
}
