// Package reconciler drives a real system (a Target) to match the desired
// objects in a statedb table.
//
// A Reconciler follows the table's change feed. Objects whose status is
// Pending or Refreshing are applied with Target.Update, deleted objects with
// Target.Delete, and the outcome is written back into each object's status
// (Done, or Error with the message). Periodically
// (Config.FullReconciliationInterval), and when asked with Prune, it runs a
// full reconciliation: Target.Prune with every desired object, to remove
// what is in the real system but not desired, then an Update of every Done
// object, to repair drift.
//
// Writers insert objects with a Pending status (StatusPending), best through
// a DesiredWriter, which writes nothing for an object that is unchanged but
// for its status. StatusIndex makes the status a table index, and
// CountByStatus counts a table's objects by status. New returns a
// reconciler that needs nothing but its Config; reconcilercell runs one as
// a job of a hive module, with its health and Prometheus metrics.
//
// # Invariants
//
// Status writes cause no work. The reconciler acts only on Pending and
// Refreshing objects, so its own status writes (Done, Error) never cause
// another Update of the same object. It writes a status back with
// CompareAndSwap at the revision it reconciled: an object that a writer
// changed meanwhile keeps the writer's version, which is reconciled in turn
// (incremental.go).
//
// One failing object delays no other. A failed object goes to a retry queue
// keyed by primary key, on its own exponential backoff
// (Config.RetryBackoffMin to RetryBackoffMax, with jitter), and the rest of
// its round carries on. A newer version of the object replaces its pending
// retry and a delete cancels it. A failed Delete is retried until it
// succeeds, terminal error or not: no delete is lost (retries.go).
//
// No prune before initialization. A full reconciliation, and so
// Target.Prune, waits until the table is initialized (every initializer
// registered with RegisterInitializer is done), so that a half-loaded table
// never makes the real system lose what is still to be loaded (full.go).
//
// A panic is an error. A panic inside a Target operation becomes the error
// of that object (of every object of a batch), which is retried like any
// other; the stack goes to the log (ops.go).
//
// Only the goroutine running Run touches the reconciler's state; Prune and
// WaitUntilReconciled reach it through channels and a mutex, and are safe
// for concurrent use.
package reconciler
