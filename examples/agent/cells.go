package main

import (
	"errors"
	"log/slog"

	"github.com/steadystate/steadystate/etcd/fleetcell"
	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/job"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilercell"
	"github.com/steadystate/steadystate/reflector/reflectorcell"
	"github.com/steadystate/steadystate/statedb"
	"github.com/steadystate/steadystate/statedb/statedbcell"
)

// agentCells assembles the agent from the example targets' cells: it gives
// them their target configs (all in the namespace of --netns) and its
// intervals, and adds the progress log, the status API, systemd's
// notifications (notify.go) and one source of desired state: the file
// loader (file mode) or fleet mode's cell (--etcd-endpoints); the other
// mode's modules are not built.
func agentCells() []cell.Cell {
	return []cell.Cell{
		statedbcell.Cell,
		hive.HTTPServer,
		reconcilercell.MetricsCell,
		reflectorcell.MetricsCell,
		cell.Module("agent", "The example node agent",
			cell.Config(defaultConfig()),
			fleetcell.ConfigCell,
			cell.Provide(newNamespace, newStateRecord, newFirstLoad, newFirstRounds, newRepairLogs, newNotifier),
			kindCells(),
			cell.Module("progress", "A progress log of each table's reconciliation",
				cell.Invoke(startProgress),
			),
			cell.Module("memory-budget", "Runs the garbage collector against --memory-budget: only at the budget until the first rounds are done",
				cell.Invoke(startMemoryBudget),
			),
			cell.Module("first-rounds", "Holds the prunes back until every object of the first desired state was tried",
				cell.Invoke(watchFirstRounds),
			),
			cell.When("file mode (--desired)", fileMode, fileModeCells),
			cell.When("fleet mode (--etcd-endpoints)", fleetcell.Config.Enabled, fleetCells),
			cell.Module("api", "Status API on a unix socket, served by the hive's HTTP server",
				cell.Provide(newAPI),
			),
			// Last: its hook is the first stopped (STOPPING=1).
			cell.Module("notify", "Tells systemd (NOTIFY_SOCKET, Type=notify) when the agent is ready and when it stops",
				cell.Invoke(startNotify),
			),
		),
	}
}

// withAgent sets the agent's prune and refresh intervals on a reconciler
// config (a decorator of the example cells'), holds its prunes back until
// the first rounds are done (firstRounds), keeps its latest repairs of
// drift for `agent status` (repairLogs), and wraps its target so that the
// state record holds what it applied (unless the kernel marks what the
// target owns: see kernelMarked) and "Removed" is logged once a delete
// succeeded (recordTarget).
func withAgent[Obj any](rc reconciler.Config[Obj], cfg AgentConfig, rec *stateRecord, repairs *repairLogs, rounds *firstRounds, log *slog.Logger) reconciler.Config[Obj] {
	rc.FullReconciliationInterval = cfg.PruneInterval
	rc.PruneAfter = rounds.Done()
	rc.RefreshInterval = cfg.RefreshInterval
	if rc.Table != nil && rc.OnRepair == nil {
		rc.OnRepair = repairs.of(rc.Table.Name()).Add
	}
	if rc.Target != nil && rc.Table != nil {
		strip := func(o Obj) Obj { return rc.SetObjectStatus(rc.CloneObject(o), reconciler.Status{}) }
		if rc.SetObjectStatus == nil || rc.CloneObject == nil {
			strip = nil
		}
		rc.Target = recordTarget(rc.Target, rec, rc.Table.Name(), rc.Table.PrimaryKey, strip, log)
	}
	return rc
}

// startProgress adds the progress log's jobs, one per table.
func startProgress(jobs job.Group, db *statedb.DB, log *slog.Logger, in kindsIn, rounds *firstRounds) error {
	var errs []error
	for _, k := range in.sorted() {
		errs = append(errs, k.progress(jobs, db, log, rounds.Done()))
	}
	return errors.Join(errs...)
}
