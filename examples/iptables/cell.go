package iptables

import (
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilercell"
	"github.com/steadystate/steadystate/statedb"
)

// DefaultIncrementalRoundSize is the round size ReconcilerConfig sets:
// large, because a round is one iptables-restore whose cost is mostly per
// call, so a bulk load should take few rounds.
const DefaultIncrementalRoundSize = 10000

// ReconcilerConfig returns the reconciler configuration for table and
// target, named "iptables", with IncrementalRoundSize
// DefaultIncrementalRoundSize and the other fields at their defaults.
// table must be the table the target was made with. Set
// FullReconciliationInterval (or call Reconciler.Prune) to have leftover
// rules and chains pruned. Rules changed or deleted by hand are repaired
// as the target's watch reports them; RefreshInterval adds a refresh by
// age.
func ReconcilerConfig(table statedb.RWTable[*Rule], target *Target) reconciler.Config[*Rule] {
	return reconciler.Config[*Rule]{
		Name:                 "iptables",
		Table:                table,
		Target:               target,
		GetObjectStatus:      (*Rule).GetStatus,
		SetObjectStatus:      (*Rule).SetStatus,
		CloneObject:          (*Rule).Clone,
		IncrementalRoundSize: DefaultIncrementalRoundSize,
	}
}

// Cell is the package as a hive module ("iptables"). It needs the hive's
// *statedb.DB (statedbcell.Cell) and a TargetConfig, which the program
// provides (its Rules may be left nil: the module's table is used). It
// provides, to the whole hive:
//
//   - the table (NewTable), as statedb.RWTable[*Rule] for the program's
//     writer of desired state and as statedb.Table[*Rule] for readers;
//   - the *Target (NewTarget);
//   - the reconciler.Config[*Rule] (ReconcilerConfig): decorate it
//     (cell.Decorate) to set intervals or other fields;
//   - the reconciler.Reconciler[*Rule], which runs as the module's job
//     "reconcile-iptables" with its health and metrics in the hive
//     (reconcilercell.Register).
//
// See package sysctl's Cell for a program that uses such a cell.
var Cell = cell.Module("iptables", "Desired iptables rules, applied with iptables-restore",
	cell.Provide(newTables, newCellTarget, ReconcilerConfig, registerReconciler),
	cell.Invoke(buildReconciler),
)

// newTables creates the table and provides its two views.
func newTables(db *statedb.DB) (statedb.RWTable[*Rule], statedb.Table[*Rule], error) {
	t, err := NewTable(db)
	if err != nil {
		return nil, nil, err
	}
	return t, t.ToTable(), nil
}

// newCellTarget creates the target on the module's table unless cfg names
// another.
func newCellTarget(cfg TargetConfig, rules statedb.Table[*Rule]) (*Target, error) {
	if cfg.Rules == nil {
		cfg.Rules = rules
	}
	return NewTarget(cfg)
}

// registerReconciler runs the reconciler as a job of the module.
func registerReconciler(p reconcilercell.Params, cfg reconciler.Config[*Rule]) (reconciler.Reconciler[*Rule], error) {
	return reconcilercell.Register(p, cfg)
}

// buildReconciler makes the hive build the reconciler (and so add its job)
// even when no other cell asks for it.
func buildReconciler(reconciler.Reconciler[*Rule]) {}
