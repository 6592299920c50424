package statedb

import "time"

// Metrics receives the DB's measurements, each for one table (by name).
// Implementations must be safe for concurrent use and cheap: they are
// called on every commit. NopMetrics is the default;
// statedbcell.NewPrometheusMetrics reports to a Prometheus registry.
type Metrics interface {
	// WriteTxnLockWait is how long a WriteTxn waited for a table's lock.
	WriteTxnLockWait(table string, d time.Duration)
	// WriteTxnDuration is how long a table was held by a WriteTxn, from
	// acquiring its lock to Commit or Abort.
	WriteTxnDuration(table string, d time.Duration)
	// TableObjects is the number of objects in a table after a commit.
	TableObjects(table string, n int)
	// TableRevision is the table's revision after a commit.
	TableRevision(table string, rev Revision)
	// TableGraveyardObjects is the number of deleted objects kept for
	// change iterators.
	TableGraveyardObjects(table string, n int)
	// ChangeIterators is the number of registered change iterators.
	ChangeIterators(table string, n int)
}

// NopMetrics discards every measurement.
type NopMetrics struct{}

// WriteTxnLockWait implements Metrics.
func (NopMetrics) WriteTxnLockWait(string, time.Duration) {}

// WriteTxnDuration implements Metrics.
func (NopMetrics) WriteTxnDuration(string, time.Duration) {}

// TableObjects implements Metrics.
func (NopMetrics) TableObjects(string, int) {}

// TableRevision implements Metrics.
func (NopMetrics) TableRevision(string, Revision) {}

// TableGraveyardObjects implements Metrics.
func (NopMetrics) TableGraveyardObjects(string, int) {}

// ChangeIterators implements Metrics.
func (NopMetrics) ChangeIterators(string, int) {}
