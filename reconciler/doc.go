// Package reconciler drives a real system (a Target) to match the desired
// objects in a statedb table.
//
// A Reconciler reads the table's change feed. Objects whose status is
// Pending or Refreshing are applied with Target.Update, deleted objects with
// Target.Delete, and the outcome is written back into each object's status.
// Periodically, and when asked with Prune, it runs a full reconciliation:
// Target.Prune with every desired object, then Update of every object to
// repair drift.
//
// Invariants (numbers refer to shared/DESIGN.md):
//
//   - (5) The reconciler acts only on Pending and Refreshing objects, so its
//     own status writes (Done, Error) never cause another Update. It writes a
//     status back with CompareAndSwap at the revision it reconciled, so an
//     object changed meanwhile keeps the writer's version, which is then
//     reconciled in turn. See incremental.go.
//   - (6) Each failure is retried on its own exponential backoff (with
//     jitter) in a queue keyed by primary key; a newer version of the object
//     replaces its pending retry and a delete cancels it. A failed Delete is
//     retried until it succeeds: no delete is lost. See retries.go.
//   - (7) Full reconciliation, and so Target.Prune, never runs before the
//     table is initialized. See full.go.
//   - (8) A panic in a Target operation becomes that object's error; the
//     stack goes to the log. See ops.go.
//
// Only the goroutine running Run touches the reconciler's state; Prune and
// WaitUntilReconciled communicate with it through channels and atomics.
package reconciler
