package reconciler

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/steadystate/steadystate/statedb"
)

// PrometheusMetrics reports reconciler metrics to a Prometheus registry,
// labelled by reconciler name (and operation). One instance may serve many
// reconcilers.
type PrometheusMetrics struct {
	opDuration   *prometheus.HistogramVec
	opTotal      *prometheus.CounterVec
	errors       *prometheus.GaugeVec
	retries      *prometheus.GaugeVec
	fullDuration *prometheus.HistogramVec
	pruneDur     *prometheus.HistogramVec
}

// NewPrometheusMetrics creates the metrics and registers them with reg. It
// returns an error if they are already registered there.
func NewPrometheusMetrics(reg prometheus.Registerer) (*PrometheusMetrics, error) {
	const ns, sub = "steadystate", "reconciler"
	opBuckets := prometheus.ExponentialBuckets(1e-6, 4, 13) // 1µs .. ~16s
	m := &PrometheusMetrics{
		opDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "operation_duration_seconds",
			Help: "Duration of target operations (a batch counts once).", Buckets: opBuckets,
		}, []string{"name", "operation"}),
		opTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "operations_total",
			Help: "Objects handled by target operations, by result.",
		}, []string{"name", "operation", "result"}),
		errors: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "errors",
			Help: "Objects whose latest attempt failed.",
		}, []string{"name"}),
		retries: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "queued_retries",
			Help: "Objects waiting to be retried.",
		}, []string{"name"}),
		fullDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "full_reconciliation_duration_seconds",
			Help: "Duration of full reconciliations (prune and refresh).", Buckets: prometheus.ExponentialBuckets(1e-4, 4, 10),
		}, []string{"name", "result"}),
		pruneDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "prune_duration_seconds",
			Help: "Duration of Target.Prune.", Buckets: prometheus.ExponentialBuckets(1e-4, 4, 10),
		}, []string{"name", "result"}),
	}
	for _, c := range []prometheus.Collector{m.opDuration, m.opTotal, m.errors, m.retries, m.fullDuration, m.pruneDur} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func result(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// OperationDone implements Metrics.
func (m *PrometheusMetrics) OperationDone(name string, op Operation, d time.Duration, n, errors int) {
	m.opDuration.WithLabelValues(name, string(op)).Observe(d.Seconds())
	if ok := n - errors; ok > 0 {
		m.opTotal.WithLabelValues(name, string(op), "ok").Add(float64(ok))
	}
	if errors > 0 {
		m.opTotal.WithLabelValues(name, string(op), "error").Add(float64(errors))
	}
}

// FullReconciliationDone implements Metrics.
func (m *PrometheusMetrics) FullReconciliationDone(name string, d time.Duration, err error) {
	m.fullDuration.WithLabelValues(name, result(err)).Observe(d.Seconds())
}

// PruneDone implements Metrics.
func (m *PrometheusMetrics) PruneDone(name string, d time.Duration, err error) {
	m.pruneDur.WithLabelValues(name, result(err)).Observe(d.Seconds())
}

// Errors implements Metrics.
func (m *PrometheusMetrics) Errors(name string, n int) {
	m.errors.WithLabelValues(name).Set(float64(n))
}

// QueuedRetries implements Metrics.
func (m *PrometheusMetrics) QueuedRetries(name string, n int) {
	m.retries.WithLabelValues(name).Set(float64(n))
}

// NewStatusCollector returns a collector of the number of objects of table
// by status kind, as steadystate_reconciler_objects{name, status}. It
// counts at scrape time, so its cost is one pass over the table per scrape
// and nothing otherwise.
func NewStatusCollector[Obj any](name string, db *statedb.DB, table statedb.Table[Obj], getStatus func(Obj) Status) prometheus.Collector {
	return &statusCollector[Obj]{
		db: db, table: table, getStatus: getStatus,
		// The name is a constant label, so that the collectors of several
		// reconcilers can share a registry (their descriptors differ).
		desc: prometheus.NewDesc("steadystate_reconciler_objects", "Objects of the reconciled table by status.",
			[]string{"status"}, prometheus.Labels{"name": name}),
	}
}

type statusCollector[Obj any] struct {
	db        *statedb.DB
	table     statedb.Table[Obj]
	getStatus func(Obj) Status
	desc      *prometheus.Desc
}

func (c *statusCollector[Obj]) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *statusCollector[Obj]) Collect(ch chan<- prometheus.Metric) {
	var counts [len(statusKindNames)]int
	for obj := range c.table.All(c.db.ReadTxn()) {
		if k := c.getStatus(obj).Kind; int(k) < len(counts) {
			counts[k]++
		}
	}
	for k := StatusKindPending; int(k) < len(counts); k++ {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[k]), k.String())
	}
}
