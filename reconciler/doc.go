// Package reconciler drives a real system (a Target) to match the desired
// objects in a statedb table.
//
// A Reconciler follows the table's change feed. Objects whose status is
// Pending or Refreshing are applied with Target.Update, deleted objects with
// Target.Delete, and the outcome is written back into each object's status
// (Done, or Error with the message). Up to Config.Workers operations run at
// once (exec.go), never two on one object. Every prune interval
// (Config.FullReconciliationInterval, the contract's name for it), and when
// asked with Prune, it prunes (prune.go): Target.Prune with every desired
// object removes what is in the real system but not desired. Apart from
// that, Done objects older than Config.RefreshInterval are checked again,
// at most Config.RefreshRate per second (rounds per second, with a
// BatchPlanner: each round of up to IncrementalRoundSize objects is
// planned against one read of the real system), to repair drift
// (refresh.go), and
// objects a DriftTarget reports are checked at once (drift.go). Config.MinRoundInterval makes bursts of
// changes coalesce into fewer rounds.
//
// A target that also implements Planner (PlanUpdate, PlanDelete and
// PlanPrune, each returning a Plan of Changes: add, change or remove, with
// what differs) says, without changing anything, what an Update, Delete or
// Prune would change. The reconciler then skips
// operations whose plan is empty, logs and counts every drift it repairs
// (Repair, Config.OnRepair) and every leftover a prune removes, and DryRun
// returns the plan of a whole table against the real system (what `agent
// diff` prints). A BatchPlanner plans many objects with one read of the
// real system.
//
// Drift is found three ways: by the refresh by age above; by a prune whose
// plan puts desired state back; and, with a target that implements
// DriftTarget, the moment the real system says so (kernel notifications,
// a cheap poll): the target reports which objects may have changed, or all
// of them, and the reconciler checks exactly those, apart from
// RefreshInterval and never paced by RefreshRate. A check plans first and
// touches only objects whose plan is not empty: those are Refreshing while
// they are repaired, then Done again (check.go, drift.go). Reports that
// come while a round runs coalesce into the next round.
//
// Several reconcilers can work on one table (routes programmed into the
// kernel and announced to a routing daemon): each keeps its status in its
// own member of a StatusSet, or in a field of its own. Every pending status
// carries an ID (Status.ID), and a reconciler writes its result whenever
// the object's status still has the ID it worked on, so no reconciler is
// starved by the others' status writes and each applies each desired
// version once.
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
// another Update of the same object. It writes a status back only while the
// object's status still has the ID of the version it applied (without ID:
// only while the object is at the revision it reconciled): an object that a
// writer changed meanwhile keeps the writer's version, which is reconciled
// in turn (incremental.go).
//
// One object, one operation at a time. Rounds run one after the other and a
// round holds each object once, so operations on one object never overlap,
// its changes are applied in order, and a delete is never overtaken by an
// older update. A target call that ignores its context is abandoned after
// OperationTimeout: its object fails (and is retried), health names it as
// stuck, and nothing else touches that object, nor prunes, until the call
// returns (exec.go).
//
// One failing object delays no other. A failed object goes to a retry queue
// keyed by primary key, on its own exponential backoff
// (Config.RetryBackoffMin to RetryBackoffMax, with jitter), and the rest of
// its round carries on. A newer version of the object replaces its pending
// retry and a delete cancels it. A failed Delete is retried until it
// succeeds, terminal error or not: no delete is lost (retries.go).
//
// Recovery is visible. An object whose update succeeds after failing leaves
// the health report at once, and is logged once at Info, "Done after N
// failures: OBJ", N counting its failures in a row (incremental.go). A
// round logs ten such lines (and ten "Drift repaired") at most, and the
// rest as one count when it ends (roundlog.go): a link that comes back
// under 50,000 routes logs a dozen lines, not 50,000.
//
// No prune before initialization. A prune, and so
// Target.Prune, waits until the table is initialized (every initializer
// registered with RegisterInitializer is done), so that a half-loaded table
// never makes the real system lose what is still to be loaded (prune.go).
// With Config.PruneAfter it also waits until that channel is closed.
//
// A panic is an error. A panic inside a Target operation becomes the error
// of that object (of every object of a batch), which is retried like any
// other; the stack goes to the log (ops.go).
//
// Only the goroutine running Run touches the reconciler's state; its
// workers get copies of what they apply and hand back outcomes under the
// executor's lock. Prune and WaitUntilReconciled reach it through channels
// and a mutex, and are safe for concurrent use; so do a DriftTarget's
// reports, from the goroutine that runs WatchDrift, which Run starts and
// waits for.
package reconciler
