package main

import (
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/steadystate/steadystate/examples/routes"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/hivetest"
	"github.com/steadystate/steadystate/hive/job"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
	"github.com/steadystate/steadystate/statedb/statedbcell"
)

// The progress job tells news from refreshes by what it saw of each key
// (seen, by the key's hash): a route's first Done is logged and counted,
// a Done after a refresh is not, a delete is counted removed, and a key
// deleted and added again is news again. Each step is waited for by the
// summary line it ends with, so a line that should not be there is caught
// exactly, not by waiting. The job sees each write before the next one
// (synctest.Wait): a Pending it never saw would make the Done after it
// look like a refresh's.
func TestProgressNewsAndRefreshes(t *testing.T) {
	synctest.Test(t, testProgressNewsAndRefreshes)
}

// progressHive starts a hive with a routes table (one initializer
// registered: done) and its progress job, logging to logs; started is
// watchProgress's.
func progressHive(t *testing.T, logs *syncBuffer, started <-chan struct{}) (db *statedb.DB, tbl statedb.RWTable[*routes.Route], done func(statedb.WriteTxn)) {
	log := slog.New(slog.NewTextHandler(logs, nil))
	hivetest.Start(t,
		statedbcell.Cell,
		cell.Module("progress", "test",
			cell.Provide(func(d *statedb.DB) (statedb.RWTable[*routes.Route], error) { return routes.NewTable(d) }),
			cell.Invoke(func(jobs job.Group, d *statedb.DB, t statedb.RWTable[*routes.Route]) error {
				db, tbl = d, t
				wtxn := d.WriteTxn(t)
				done = t.RegisterInitializer(wtxn, "test")
				wtxn.Commit()
				return watchProgress(jobs, d, statedb.Table[*routes.Route](t), reconciler.Reconciler[*routes.Route](nopReconciler[*routes.Route]{}), log, (*routes.Route).GetStatus, started)
			}),
		),
	)
	return db, tbl, done
}

func testProgressNewsAndRefreshes(t *testing.T) {
	var logs syncBuffer
	db, tbl, done := progressHive(t, &logs, nil)
	route := func(i int, st reconciler.Status) *routes.Route {
		return &routes.Route{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(i), 0}), 24), Type: "blackhole", Status: st}
	}
	write := func(init bool, objs ...*routes.Route) {
		wtxn := db.WriteTxn(tbl)
		for _, o := range objs {
			if _, _, err := tbl.Insert(wtxn, o); err != nil {
				t.Fatal(err)
			}
		}
		if init {
			done(wtxn)
		}
		wtxn.Commit()
		synctest.Wait()
	}
	// step checks that the summaries are n, the last one want, and
	// returns the lines logged since the last step.
	last := 0
	step := func(n int, want string) string {
		t.Helper()
		all := logs.String()
		if got := strings.Count(all, "reconciled\""); got != n {
			t.Fatalf("%d summaries, want %d (the last %q):\n%s", got, n, want, all)
		}
		lines := all[last:]
		last = len(all)
		if !strings.Contains(lines, want) {
			t.Fatalf("the summary is not %q:\n%s", want, lines)
		}
		return lines
	}
	// A start: three routes Pending, then Done.
	write(true, route(1, reconciler.StatusPending()), route(2, reconciler.StatusPending()), route(3, reconciler.StatusPending()))
	write(false, route(1, reconciler.StatusDone()), route(2, reconciler.StatusDone()), route(3, reconciler.StatusDone()))
	if lines := step(1, `msg="All 3 routes reconciled" applied=3 removed=0`); strings.Count(lines, `msg="Done: route`) != 3 {
		t.Fatalf("want a Done line for each route:\n%s", lines)
	}
	// A refresh of route 1 (Refreshing, then Done) is no news; the edit
	// of route 2 (Pending, then Done) is, and ends the step.
	write(false, route(1, reconciler.StatusRefreshing()))
	write(false, route(1, reconciler.StatusDone()))
	write(false, route(2, reconciler.StatusPending()))
	write(false, route(2, reconciler.StatusDone()))
	if lines := step(2, `applied=1 removed=0`); strings.Count(lines, `msg="Done: route`) != 1 || !strings.Contains(lines, "10.0.2.0/24") {
		t.Fatalf("want one Done line, route 2's:\n%s", lines)
	}
	// Route 3 deleted is removed; added again, it is news.
	wtxn := db.WriteTxn(tbl)
	if _, _, err := tbl.Delete(wtxn, route(3, reconciler.Status{})); err != nil {
		t.Fatal(err)
	}
	wtxn.Commit()
	synctest.Wait()
	step(3, `msg="All 2 routes reconciled" applied=0 removed=1`)
	write(false, route(3, reconciler.StatusPending()))
	write(false, route(3, reconciler.StatusDone()))
	if lines := step(4, `msg="All 3 routes reconciled" applied=1 removed=0`); !strings.Contains(lines, `msg="Done: route`) {
		t.Fatalf("route 3 added again is news:\n%s", lines)
	}
}

// Until the start is over (started closes), the progress job does not
// read the changes at each commit: a start's routes, written Pending and
// then Done, are counted once it is over, each once, as applied.
func TestProgressWaitsForStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs syncBuffer
		started := make(chan struct{})
		db, tbl, done := progressHive(t, &logs, started)
		write := func(init bool, st reconciler.Status) {
			wtxn := db.WriteTxn(tbl)
			for i := range 3 {
				r := &routes.Route{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(i), 0}), 24), Type: "blackhole", Status: st}
				if _, _, err := tbl.Insert(wtxn, r); err != nil {
					t.Fatal(err)
				}
			}
			if init {
				done(wtxn)
			}
			wtxn.Commit()
			synctest.Wait()
		}
		write(true, reconciler.StatusPending())
		write(false, reconciler.StatusDone())
		if got := logs.String(); strings.Contains(got, "reconciled") || strings.Contains(got, "Done: route") {
			t.Fatalf("the progress job read the changes before the start was over:\n%s", got)
		}
		close(started)
		synctest.Wait()
		got := logs.String()
		if !strings.Contains(got, `msg="All 3 routes reconciled" applied=3 removed=0`) || strings.Count(got, `msg="Done: route`) != 3 {
			t.Fatalf("after the start, want one summary of 3 applied and a Done line for each:\n%s", got)
		}
	})
}
