package reconcilercell

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// The label names of the package doc.
const (
	labelReconciler = "reconciler"
	labelTable      = "table"
	labelOperation  = "operation"
	labelResult     = "result"
	labelStatus     = "status"
)

// PrometheusMetrics is the reconciler.Metrics that reports to Prometheus:
// the metrics of the package doc except the objects by status (see
// NewStatusCollector). One instance serves any number of reconcilers;
// their series are told apart by the reconciler and table labels.
type PrometheusMetrics struct {
	// Measurements added to reconciler.Metrics later are discarded until
	// they are implemented here.
	reconciler.NopMetrics

	opDuration   *prometheus.HistogramVec
	opTotal      *prometheus.CounterVec
	retries      *prometheus.GaugeVec
	fullDuration *prometheus.HistogramVec
	pruneDur     *prometheus.HistogramVec
	planDuration *prometheus.HistogramVec
	drift        *prometheus.CounterVec
	driftReports *prometheus.CounterVec
	driftChecked *prometheus.CounterVec
	pruned       *prometheus.CounterVec
	skipped      *prometheus.CounterVec
	refreshQueue *prometheus.GaugeVec
	workersBusy  *prometheus.GaugeVec
	stuck        *prometheus.GaugeVec
}

var _ reconciler.Metrics = (*PrometheusMetrics)(nil)

// NewPrometheusMetrics creates the metrics and registers them with reg. It
// returns the error of reg.Register if they are already registered there.
func NewPrometheusMetrics(reg prometheus.Registerer) (*PrometheusMetrics, error) {
	const ns, sub = "steadystate", "reconciler"
	opBuckets := prometheus.ExponentialBuckets(1e-6, 4, 13)   // 1µs .. ~16s
	fullBuckets := prometheus.ExponentialBuckets(1e-4, 4, 10) // 100µs .. ~26s
	ids := []string{labelReconciler, labelTable}
	with := func(more ...string) []string { return append(append([]string(nil), ids...), more...) }
	m := &PrometheusMetrics{
		opDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "operation_duration_seconds",
			Help: "Duration of target operations (a batch counts once).", Buckets: opBuckets,
		}, with(labelOperation)),
		opTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "operations_total",
			Help: "Objects handled by target operations, by result.",
		}, with(labelOperation, labelResult)),
		retries: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "queued_retries",
			Help: "Objects waiting to be retried.",
		}, with()),
		fullDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "prune_round_duration_seconds",
			Help: "Duration of full reconciliations (prunes, plan included).", Buckets: fullBuckets,
		}, with(labelResult)),
		pruneDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "prune_duration_seconds",
			Help: "Duration of Target.Prune.", Buckets: fullBuckets,
		}, with(labelResult)),
		planDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "plan_duration_seconds",
			Help: "Duration of target plans (Planner targets), by operation.", Buckets: opBuckets,
		}, with(labelOperation, labelResult)),
		drift: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "drift_repaired_total",
			Help: "Repairs of drift: objects found changed behind the reconciler's back and put back (by a refresh, a report of the target, or a prune).",
		}, with()),
		driftReports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "drift_reports_total",
			Help: "Reports of possible drift from the target (objects, or all of them), before coalescing.",
		}, with()),
		driftChecked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "drift_checked_total",
			Help: "Objects checked against the real system because the target reported possible drift.",
		}, with()),
		pruned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "pruned_total",
			Help: "Leftovers removed from the real system by prunes.",
		}, with()),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "skipped_total",
			Help: "Operations not made because their plan was empty.",
		}, with(labelOperation)),
		refreshQueue: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "refresh_queue",
			Help: "Done objects due for a refresh, waiting for the refresh rate.",
		}, with()),
		workersBusy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "workers_busy",
			Help: "Workers running target operations.",
		}, with()),
		stuck: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "stuck_operations",
			Help: "Abandoned target operations that have not returned.",
		}, with()),
	}
	for _, c := range []prometheus.Collector{m.opDuration, m.opTotal, m.retries, m.fullDuration, m.pruneDur,
		m.planDuration, m.drift, m.driftReports, m.driftChecked, m.pruned, m.skipped, m.refreshQueue, m.workersBusy, m.stuck} {
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

// OperationDone implements reconciler.Metrics.
func (m *PrometheusMetrics) OperationDone(rec, table string, op reconciler.Operation, d time.Duration, n, errors int) {
	m.opDuration.WithLabelValues(rec, table, string(op)).Observe(d.Seconds())
	if ok := n - errors; ok > 0 {
		m.opTotal.WithLabelValues(rec, table, string(op), "ok").Add(float64(ok))
	}
	if errors > 0 {
		m.opTotal.WithLabelValues(rec, table, string(op), "error").Add(float64(errors))
	}
}

// PruneRoundDone implements reconciler.Metrics.
func (m *PrometheusMetrics) PruneRoundDone(rec, table string, d time.Duration, err error) {
	m.fullDuration.WithLabelValues(rec, table, result(err)).Observe(d.Seconds())
}

// PruneDone implements reconciler.Metrics.
func (m *PrometheusMetrics) PruneDone(rec, table string, d time.Duration, err error) {
	m.pruneDur.WithLabelValues(rec, table, result(err)).Observe(d.Seconds())
}

// Errors implements reconciler.Metrics. It reports nothing: the failing
// objects are steadystate_reconciler_objects{status="Error"}, counted from
// the table by NewStatusCollector.
func (m *PrometheusMetrics) Errors(string, string, int) {}

// QueuedRetries implements reconciler.Metrics.
func (m *PrometheusMetrics) QueuedRetries(rec, table string, n int) {
	m.retries.WithLabelValues(rec, table).Set(float64(n))
}

// PlanDone implements reconciler.Metrics.
func (m *PrometheusMetrics) PlanDone(rec, table string, op reconciler.Operation, d time.Duration, err error) {
	m.planDuration.WithLabelValues(rec, table, string(op), result(err)).Observe(d.Seconds())
}

// DriftRepaired implements reconciler.Metrics.
func (m *PrometheusMetrics) DriftRepaired(rec, table string, n int) {
	m.drift.WithLabelValues(rec, table).Add(float64(n))
}

// DriftChecked implements reconciler.Metrics.
func (m *PrometheusMetrics) DriftChecked(rec, table string, reports, checked int) {
	m.driftReports.WithLabelValues(rec, table).Add(float64(reports))
	m.driftChecked.WithLabelValues(rec, table).Add(float64(checked))
}

// Pruned implements reconciler.Metrics.
func (m *PrometheusMetrics) Pruned(rec, table string, n int) {
	m.pruned.WithLabelValues(rec, table).Add(float64(n))
}

// Skipped implements reconciler.Metrics.
func (m *PrometheusMetrics) Skipped(rec, table string, op reconciler.Operation, n int) {
	m.skipped.WithLabelValues(rec, table, string(op)).Add(float64(n))
}

// RefreshQueue implements reconciler.Metrics.
func (m *PrometheusMetrics) RefreshQueue(rec, table string, n int) {
	m.refreshQueue.WithLabelValues(rec, table).Set(float64(n))
}

// WorkersBusy implements reconciler.Metrics.
func (m *PrometheusMetrics) WorkersBusy(rec, table string, n int) {
	m.workersBusy.WithLabelValues(rec, table).Set(float64(n))
}

// StuckOperations implements reconciler.Metrics.
func (m *PrometheusMetrics) StuckOperations(rec, table string, n int) {
	m.stuck.WithLabelValues(rec, table).Set(float64(n))
}

// NewStatusCollector returns a collector of the objects of table by status
// kind, steadystate_reconciler_objects{reconciler, table, status}, for the
// reconciler named rec. It counts with reconciler.CountByStatus at scrape
// time: one pass over the table per scrape and nothing otherwise. The
// collectors of several reconcilers can share a registry; two of the same
// reconciler and table cannot.
func NewStatusCollector[Obj any](rec string, db *statedb.DB, table statedb.Table[Obj], getStatus func(Obj) reconciler.Status) prometheus.Collector {
	return &statusCollector[Obj]{
		db: db, table: table, getStatus: getStatus,
		// The reconciler and table are constant labels, so that each
		// collector has a descriptor of its own.
		desc: prometheus.NewDesc("steadystate_reconciler_objects", "Objects of the reconciled table by status.",
			[]string{labelStatus}, prometheus.Labels{labelReconciler: rec, labelTable: table.Name()}),
	}
}

type statusCollector[Obj any] struct {
	db        *statedb.DB
	table     statedb.Table[Obj]
	getStatus func(Obj) reconciler.Status
	desc      *prometheus.Desc
}

func (c *statusCollector[Obj]) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *statusCollector[Obj]) Collect(ch chan<- prometheus.Metric) {
	for kind, n := range reconciler.CountByStatus(c.db.ReadTxn(), c.table, c.getStatus) {
		if kind < reconciler.StatusKindPending || kind > reconciler.StatusKindError {
			continue // Unset: not the reconciler's business, it never acts on them
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), kind.String())
	}
}
