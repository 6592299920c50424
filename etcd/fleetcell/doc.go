// Package fleetcell is fleet mode's node side as a hive cell: any program
// built on steadystate's hive gets its desired state from a fleet's etcd
// and gives its status back, by adding Cell (and ConfigCell) and providing
// each of its tables as a Kind. The operator's side is package fleetcmd.
//
// The path of a desired object: an operator's `fleet apply` writes each
// table's objects under the fleet's prefix (package etcd's layout), one key
// per object whose name is the object's (Name) and whose value is what
// Decode reads; the node's one reflector (a reflector.Multi) lists and
// watches all of the program's tables through one etcd.Source and commits
// each etcd revision to all of them in one write transaction, so the node
// switches from one desired state to the next whole; the program's
// reconcilers apply them; the status reporter publishes the node's summary
// (the revision reached, one number; counts by status; the latest errors)
// under a lease (etcd.Publisher), and the fleet view reads every node's.
//
//	hive.New(
//		statedbcell.Cell, reflectorcell.MetricsCell,
//		myTablesAndReconcilers,
//		cell.Provide(func(t statedb.RWTable[*Thing], r reconciler.Reconciler[*Thing]) fleetcell.TableOut {
//			return fleetcell.Out(fleetcell.Kind[*Thing]{Table: t, Reconciler: r, ...})
//		}),
//		fleetcell.ConfigCell,
//		cell.When("fleet mode", fleetcell.Config.Enabled, fleetcell.Cell),
//	)
//
// The node claims its name in a start hook before any desired object can
// reach a table (the source's first list waits for it): a second live node
// of the same name fails to start. Its health scope "etcd" says whether it
// joined; the reflector's and the reporter's jobs report beside it.
package fleetcell
