package reconciler

import "time"

// Operation names a kind of target operation in metrics.
type Operation string

// The operations a reconciler performs.
const (
	OpUpdate  Operation = "update"
	OpDelete  Operation = "delete"
	OpPrune   Operation = "prune"
	OpRefresh Operation = "refresh" // Update of a Done object that came of age
)

// Metrics receives a reconciler's measurements, each with the reconciler's
// name (Config.Name) and its table's name, so that one implementation may
// serve many reconcilers. Calls come from the goroutine running Run and
// from its workers (Config.Workers): implementations must be safe for
// concurrent use. NopMetrics is the default;
// reconcilercell.NewPrometheusMetrics reports to a Prometheus registry.
//
// The interface grows as the reconciler measures more. An implementation
// embeds NopMetrics and overrides the methods it cares about, so that a
// new method never breaks it (it discards the new measurement until it
// overrides that method too).
type Metrics interface {
	// OperationDone is one target operation on n objects (n > 1 for a
	// batch) that took d; errors is how many of them failed.
	OperationDone(reconciler, table string, op Operation, d time.Duration, n, errors int)
	// PruneRoundDone is one prune round (requested or by the interval)
	// that took d, plan included; err is its failure.
	PruneRoundDone(reconciler, table string, d time.Duration, err error)
	// PruneDone is one Target.Prune call that took d.
	PruneDone(reconciler, table string, d time.Duration, err error)
	// PlanDone is one plan of op (Planner targets) that took d.
	PlanDone(reconciler, table string, op Operation, d time.Duration, err error)
	// DriftRepaired counts n repairs of drift (Planner targets): objects
	// whose check found the real system changed behind the reconciler's
	// back and put it back, whether the drift was found by a refresh by
	// age, reported by a DriftTarget, or put back by a prune (counted per
	// change marked Repair); see Repair.
	DriftRepaired(reconciler, table string, n int)
	// DriftChecked is one round of a DriftTarget's reports: reports is how
	// many reports came since the last round (ChangedAll and ChangedPrefix
	// calls, and Changed calls for objects of the table; others are
	// dropped uncounted),
	// checked how many objects the round checked against the real system.
	// A flood of reports about few objects is coalesced into few checks.
	DriftChecked(reconciler, table string, reports, checked int)
	// Pruned counts the n changes of a prune's plan once the prune
	// succeeded: the leftovers it removed, one change each as the example
	// targets plan them (Planner targets).
	Pruned(reconciler, table string, n int)
	// Skipped counts n Updates or Deletes not made because their plan was
	// empty: the real system already matched (Planner targets).
	Skipped(reconciler, table string, op Operation, n int)
	// Errors is the number of objects whose latest attempt failed, failed
	// Deletes included (their objects are no longer in the table).
	Errors(reconciler, table string, n int)
	// QueuedRetries is the number of objects waiting to be retried.
	QueuedRetries(reconciler, table string, n int)
	// RefreshQueue is the number of Done objects due for a refresh that
	// wait for the refresh rate.
	RefreshQueue(reconciler, table string, n int)
	// WorkersBusy is the number of workers given the current round (0
	// between rounds), stuck operations not counted.
	WorkersBusy(reconciler, table string, n int)
	// StuckOperations is the number of abandoned operations that have not
	// returned yet.
	StuckOperations(reconciler, table string, n int)
}

// isNop reports whether m discards everything (is NopMetrics): nothing
// needs timing for it.
func isNop(m Metrics) bool {
	switch m.(type) {
	case NopMetrics, *NopMetrics:
		return true
	}
	return false
}

// NopMetrics discards every measurement.
type NopMetrics struct{}

// OperationDone implements Metrics.
func (NopMetrics) OperationDone(string, string, Operation, time.Duration, int, int) {}

// PruneRoundDone implements Metrics.
func (NopMetrics) PruneRoundDone(string, string, time.Duration, error) {}

// PruneDone implements Metrics.
func (NopMetrics) PruneDone(string, string, time.Duration, error) {}

// PlanDone implements Metrics.
func (NopMetrics) PlanDone(string, string, Operation, time.Duration, error) {}

// DriftRepaired implements Metrics.
func (NopMetrics) DriftRepaired(string, string, int) {}

// DriftChecked implements Metrics.
func (NopMetrics) DriftChecked(string, string, int, int) {}

// Pruned implements Metrics.
func (NopMetrics) Pruned(string, string, int) {}

// Skipped implements Metrics.
func (NopMetrics) Skipped(string, string, Operation, int) {}

// Errors implements Metrics.
func (NopMetrics) Errors(string, string, int) {}

// QueuedRetries implements Metrics.
func (NopMetrics) QueuedRetries(string, string, int) {}

// RefreshQueue implements Metrics.
func (NopMetrics) RefreshQueue(string, string, int) {}

// WorkersBusy implements Metrics.
func (NopMetrics) WorkersBusy(string, string, int) {}

// StuckOperations implements Metrics.
func (NopMetrics) StuckOperations(string, string, int) {}
