package routes

import (
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// ReconcilerConfig returns the reconciler configuration that keeps the
// routes of table applied with target: Name "routes", the status accessors
// and the clone function filled in, every other field at its default. Set
// FullReconciliationInterval (or call Reconciler.Prune) to have drift
// repaired and stale routes pruned.
func ReconcilerConfig(table statedb.RWTable[*Route], target *Target) reconciler.Config[*Route] {
	return reconciler.Config[*Route]{
		Name:            "routes",
		Table:           table,
		Target:          target,
		GetObjectStatus: (*Route).GetStatus,
		SetObjectStatus: (*Route).SetStatus,
		CloneObject:     (*Route).Clone,
	}
}
