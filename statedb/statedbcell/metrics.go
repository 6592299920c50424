package statedbcell

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/steadystate/steadystate/statedb"
)

// PrometheusMetrics is the statedb.Metrics that reports to Prometheus: the
// metrics listed in the package doc, labelled by table. Create it with
// NewPrometheusMetrics and pass it to statedb.New with statedb.WithMetrics
// (Cell does that for the hive's DB).
type PrometheusMetrics struct {
	lockWait    *prometheus.HistogramVec
	txnDuration *prometheus.HistogramVec
	objects     *prometheus.GaugeVec
	revision    *prometheus.GaugeVec
	graveyard   *prometheus.GaugeVec
	iterators   *prometheus.GaugeVec
}

// txnBuckets spans 1µs to ~4s: write transactions of an in-memory database
// are short, and the interesting part is the microseconds.
var txnBuckets = prometheus.ExponentialBuckets(1e-6, 4, 12)

// NewPrometheusMetrics creates the metrics of one DB and registers them
// with reg (never the global registry unless the caller passes it). It
// returns the error of reg.Register when a metric of the same name is
// already registered there, e.g. by a second DB: give each DB a registry of
// its own, or wrap reg with prometheus.WrapRegistererWith.
func NewPrometheusMetrics(reg prometheus.Registerer) (*PrometheusMetrics, error) {
	const ns, sub, table = "steadystate", "statedb", "table"
	m := &PrometheusMetrics{
		lockWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "write_txn_lock_wait_seconds",
			Help:    "Time a write transaction waited for the table's lock.",
			Buckets: txnBuckets,
		}, []string{table}),
		txnDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "write_txn_duration_seconds",
			Help:    "Time a write transaction held the table's lock, until commit or abort.",
			Buckets: txnBuckets,
		}, []string{table}),
		objects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "table_objects",
			Help: "Number of objects in the table.",
		}, []string{table}),
		revision: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "table_revision",
			Help: "Current revision of the table.",
		}, []string{table}),
		graveyard: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "table_graveyard_objects",
			Help: "Deleted objects kept until every change iterator has seen them.",
		}, []string{table}),
		iterators: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "table_change_iterators",
			Help: "Registered change iterators of the table.",
		}, []string{table}),
	}
	for _, c := range []prometheus.Collector{m.lockWait, m.txnDuration, m.objects, m.revision, m.graveyard, m.iterators} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

var _ statedb.Metrics = (*PrometheusMetrics)(nil)

// WriteTxnLockWait implements statedb.Metrics.
func (m *PrometheusMetrics) WriteTxnLockWait(table string, d time.Duration) {
	m.lockWait.WithLabelValues(table).Observe(d.Seconds())
}

// WriteTxnDuration implements statedb.Metrics.
func (m *PrometheusMetrics) WriteTxnDuration(table string, d time.Duration) {
	m.txnDuration.WithLabelValues(table).Observe(d.Seconds())
}

// TableObjects implements statedb.Metrics.
func (m *PrometheusMetrics) TableObjects(table string, n int) {
	m.objects.WithLabelValues(table).Set(float64(n))
}

// TableRevision implements statedb.Metrics.
func (m *PrometheusMetrics) TableRevision(table string, rev statedb.Revision) {
	m.revision.WithLabelValues(table).Set(float64(rev))
}

// TableGraveyardObjects implements statedb.Metrics.
func (m *PrometheusMetrics) TableGraveyardObjects(table string, n int) {
	m.graveyard.WithLabelValues(table).Set(float64(n))
}

// ChangeIterators implements statedb.Metrics.
func (m *PrometheusMetrics) ChangeIterators(table string, n int) {
	m.iterators.WithLabelValues(table).Set(float64(n))
}
