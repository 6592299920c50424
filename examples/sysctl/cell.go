package sysctl

import (
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilercell"
	"github.com/steadystate/steadystate/statedb"
)

// ReconcilerConfig returns the reconciler configuration for table and
// target: Name "sysctl", the status accessors and the clone function, the
// other fields at the reconciler's defaults. Set
// FullReconciliationInterval (or call Reconciler.Prune) to have the
// values of sysctls that are no longer desired restored. Values changed by
// hand are repaired as the target's check finds them
// (TargetConfig.CheckInterval); RefreshInterval adds a refresh by age.
func ReconcilerConfig(table statedb.RWTable[*Sysctl], target *Target) reconciler.Config[*Sysctl] {
	return reconciler.Config[*Sysctl]{
		Name:            "sysctl",
		Table:           table,
		Target:          target,
		GetObjectStatus: (*Sysctl).GetStatus,
		SetObjectStatus: (*Sysctl).SetStatus,
		CloneObject:     (*Sysctl).Clone,
	}
}

// Cell is the package as a hive module ("sysctl"). It needs the hive's
// *statedb.DB (statedbcell.Cell) and a TargetConfig, which the program
// provides. It provides, to the whole hive:
//
//   - the table (NewTable), as statedb.RWTable[*Sysctl] for the program's
//     writer of desired state and as statedb.Table[*Sysctl] for readers;
//   - the *Target (NewTarget);
//   - the reconciler.Config[*Sysctl] (ReconcilerConfig): decorate it
//     (cell.Decorate) to set intervals or other fields;
//   - the reconciler.Reconciler[*Sysctl], which runs as the module's job
//     "reconcile-sysctl" with its health and metrics in the hive
//     (reconcilercell.Register; include reconcilercell.MetricsCell for
//     the metrics).
//
// A program:
//
//	hive.New(
//		statedbcell.Cell,
//		reconcilercell.MetricsCell,
//		cell.Provide(func() sysctl.TargetConfig { return sysctl.TargetConfig{NetNS: "blue"} }),
//		sysctl.Cell,
//		cell.Invoke(startWriter), // takes statedb.RWTable[*sysctl.Sysctl]
//	)
var Cell = cell.Module("sysctl", "Desired sysctls, written to /proc/sys",
	cell.Provide(newTables, NewTarget, ReconcilerConfig, registerReconciler),
	cell.Invoke(buildReconciler),
)

// newTables creates the table and provides its two views.
func newTables(db *statedb.DB) (statedb.RWTable[*Sysctl], statedb.Table[*Sysctl], error) {
	t, err := NewTable(db)
	if err != nil {
		return nil, nil, err
	}
	return t, t.ToTable(), nil
}

// registerReconciler runs the reconciler as a job of the module.
func registerReconciler(p reconcilercell.Params, cfg reconciler.Config[*Sysctl]) (reconciler.Reconciler[*Sysctl], error) {
	return reconcilercell.Register(p, cfg)
}

// buildReconciler makes the hive build the reconciler (and so add its job)
// even when no other cell asks for it.
func buildReconciler(reconciler.Reconciler[*Sysctl]) {}
