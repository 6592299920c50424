package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/steadystate/steadystate/examples/iptables"
	"github.com/steadystate/steadystate/examples/routes"
	"github.com/steadystate/steadystate/examples/sysctl"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/job"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// The progress log shows a new user what the agent does: every object that
// reaches Done or Error, every object removed, and when everything is
// reconciled.

func describeSysctl(s *sysctl.Sysctl) string { return "sysctl " + s.String() }
func describeRoute(r *routes.Route) string   { return "route " + r.String() }
func describeRule(r *iptables.Rule) string   { return "rule " + r.String() }

// notDone are the status kinds of objects still to be reconciled.
var notDone = []reconciler.StatusKind{reconciler.StatusKindUnset, reconciler.StatusKindPending, reconciler.StatusKindRefreshing, reconciler.StatusKindError}

// watchProgress logs the status changes of one table as a job.
func watchProgress[Obj any](jobs job.Group, db *statedb.DB, table statedb.Table[Obj], log *slog.Logger,
	getStatus func(Obj) reconciler.Status, describe func(Obj) string) error {
	wtxn := db.WriteTxn(table)
	changes, err := table.Changes(wtxn)
	wtxn.Commit()
	if err != nil {
		return err
	}
	return jobs.Add(job.OneShot("progress-"+table.Name(), func(ctx context.Context, _ cell.Health) error {
		defer changes.Close()
		allDone := false
		for {
			txn := db.ReadTxn()
			seq, watch := changes.Next(txn)
			for ch := range seq {
				switch st := getStatus(ch.Object); {
				case ch.Deleted:
					log.Info("Removed " + describe(ch.Object))
				case st.Kind == reconciler.StatusKindDone:
					log.Info("Done: " + describe(ch.Object))
				case st.Kind == reconciler.StatusKindError:
					log.Warn("Error: "+describe(ch.Object), "error", st.Error)
				}
			}
			// The objects not Done, found through the table's status index:
			// no pass over the table on every change, and none once all
			// are Done.
			pending := 0
			for _, n := range reconciler.CountByStatus(txn, table, getStatus, notDone...) {
				pending += n
			}
			if initialized, _ := table.Initialized(txn); initialized && pending == 0 && !allDone {
				log.Info(fmt.Sprintf("All %d %s reconciled", table.NumObjects(txn), table.Name()))
			}
			allDone = pending == 0
			select {
			case <-ctx.Done():
				return nil
			case <-watch:
			}
		}
	}))
}
