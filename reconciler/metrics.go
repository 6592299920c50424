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

// Metrics receives a reconciler's measurements, labelled by its name. Calls
// come from the reconciler's own goroutine. NopMetrics is the default;
// NewPrometheusMetrics reports to a Prometheus registry.
type Metrics interface {
	// OperationDone is one target operation on n objects (n > 1 for a
	// batch) that took d; errors is how many of them failed.
	OperationDone(name string, op Operation, d time.Duration, n, errors int)
	// FullReconciliationDone is one full reconciliation (prune and refresh)
	// that took d.
	FullReconciliationDone(name string, d time.Duration, err error)
	// PruneDone is one Target.Prune call that took d.
	PruneDone(name string, d time.Duration, err error)
	// Errors is the number of objects currently failing.
	Errors(name string, n int)
	// QueuedRetries is the number of objects waiting to be retried.
	QueuedRetries(name string, n int)
}

// NopMetrics discards every measurement.
type NopMetrics struct{}

// OperationDone implements Metrics.
func (NopMetrics) OperationDone(string, Operation, time.Duration, int, int) {}

// FullReconciliationDone implements Metrics.
func (NopMetrics) FullReconciliationDone(string, time.Duration, error) {}

// PruneDone implements Metrics.
func (NopMetrics) PruneDone(string, time.Duration, error) {}

// Errors implements Metrics.
func (NopMetrics) Errors(string, int) {}

// QueuedRetries implements Metrics.
func (NopMetrics) QueuedRetries(string, int) {}
