package reconciler

import "time"

// Operation names a kind of target operation in metrics.
type Operation string

// The operations a reconciler performs.
const (
	OpUpdate  Operation = "update"
	OpDelete  Operation = "delete"
	OpPrune   Operation = "prune"
	OpRefresh Operation = "refresh" // Update during full reconciliation
)

// Metrics receives a reconciler's measurements, each with the reconciler's
// name (Config.Name) and its table's name, so that one implementation may
// serve many reconcilers. Calls come from the goroutine running Run.
// NopMetrics is the default; reconcilercell.NewPrometheusMetrics reports to
// a Prometheus registry.
type Metrics interface {
	// OperationDone is one target operation on n objects (n > 1 for a
	// batch) that took d; errors is how many of them failed.
	OperationDone(reconciler, table string, op Operation, d time.Duration, n, errors int)
	// FullReconciliationDone is one full reconciliation (prune and refresh)
	// that took d; err is the prune's failure.
	FullReconciliationDone(reconciler, table string, d time.Duration, err error)
	// PruneDone is one Target.Prune call that took d.
	PruneDone(reconciler, table string, d time.Duration, err error)
	// Errors is the number of objects whose latest attempt failed, failed
	// Deletes included (their objects are no longer in the table).
	Errors(reconciler, table string, n int)
	// QueuedRetries is the number of objects waiting to be retried.
	QueuedRetries(reconciler, table string, n int)
}

// NopMetrics discards every measurement.
type NopMetrics struct{}

// OperationDone implements Metrics.
func (NopMetrics) OperationDone(string, string, Operation, time.Duration, int, int) {}

// FullReconciliationDone implements Metrics.
func (NopMetrics) FullReconciliationDone(string, string, time.Duration, error) {}

// PruneDone implements Metrics.
func (NopMetrics) PruneDone(string, string, time.Duration, error) {}

// Errors implements Metrics.
func (NopMetrics) Errors(string, string, int) {}

// QueuedRetries implements Metrics.
func (NopMetrics) QueuedRetries(string, string, int) {}
