package routes

import (
	"context"

	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilercell"
	"github.com/steadystate/steadystate/statedb"
)

// DefaultIncrementalRoundSize is the round size ReconcilerConfig sets:
// large, because a round of a restart costs a listing of its tables (see
// UpdateBatch), which costs as much as the tables are large, so a restart
// should take few rounds.
const DefaultIncrementalRoundSize = 50_000

// ReconcilerConfig returns the reconciler configuration that keeps the
// routes of table applied with target: Name "routes", the status accessors
// and the clone function filled in, IncrementalRoundSize
// DefaultIncrementalRoundSize, every other field at its default. Set
// FullReconciliationInterval (or call Reconciler.Prune) to have stale
// routes pruned. Drift is repaired as the target's watch reports it;
// RefreshInterval adds a refresh by age, as a backstop.
func ReconcilerConfig(table statedb.RWTable[*Route], target *Target) reconciler.Config[*Route] {
	return reconciler.Config[*Route]{
		Name:            "routes",
		Table:           table,
		Target:          target,
		GetObjectStatus: (*Route).GetStatus,
		SetObjectStatus: (*Route).SetStatus,
		CloneObject:     (*Route).Clone,
		// A round of a restart is a listing of its tables: few rounds.
		IncrementalRoundSize: DefaultIncrementalRoundSize,
	}
}

// Cell is the package as a hive module ("routes"). It needs the hive's
// *statedb.DB (statedbcell.Cell) and a TargetConfig, which the program
// provides. It provides, to the whole hive:
//
//   - the table (NewTable), as statedb.RWTable[*Route] for the program's
//     writer of desired state and as statedb.Table[*Route] for readers;
//   - the *Target (NewTarget), closed when the hive stops;
//   - the reconciler.Config[*Route] (ReconcilerConfig): decorate it
//     (cell.Decorate) to set intervals or other fields;
//   - the reconciler.Reconciler[*Route], which runs as the module's job
//     "reconcile-routes" with its health and metrics in the hive
//     (reconcilercell.Register).
//
// See package sysctl's Cell for a program that uses such a cell.
var Cell = cell.Module("routes", "Desired routes, applied over rtnetlink",
	cell.Provide(newTables, newCellTarget, ReconcilerConfig, registerReconciler),
	cell.Invoke(buildReconciler),
)

// newTables creates the table and provides its two views.
func newTables(db *statedb.DB) (statedb.RWTable[*Route], statedb.Table[*Route], error) {
	t, err := NewTable(db)
	if err != nil {
		return nil, nil, err
	}
	return t, t.ToTable(), nil
}

// newCellTarget creates the target and closes it when the hive stops
// (after the reconciler: hooks stop in reverse order).
func newCellTarget(cfg TargetConfig, lc cell.Lifecycle) (*Target, error) {
	t, err := NewTarget(cfg)
	if err != nil {
		return nil, err
	}
	lc.Append(cell.Hook{OnStop: func(context.Context) error { return t.Close() }})
	return t, nil
}

// registerReconciler runs the reconciler as a job of the module.
func registerReconciler(p reconcilercell.Params, cfg reconciler.Config[*Route]) (reconciler.Reconciler[*Route], error) {
	return reconcilercell.Register(p, cfg)
}

// buildReconciler makes the hive build the reconciler (and so add its job)
// even when no other cell asks for it.
func buildReconciler(reconciler.Reconciler[*Route]) {}
