// Package reflectorcell is the glue between the reflector and the hive
// framework: Register runs a reflector as a job of a hive module, with its
// health in the module's health tree, and PrometheusMetrics reports its
// measurements. The reflector package imports neither hive nor Prometheus.
//
//	hive.New(
//		statedbcell.Cell,
//		reflectorcell.MetricsCell,
//		cell.Module("routes", "Desired routes from etcd",
//			statedbcell.TableCell("routes", routes.PrimaryIndex),
//			cell.Invoke(func(p reflectorcell.Params, t statedb.RWTable[*routes.Route], src *etcd.Source) error {
//				_, err := reflectorcell.Register(p, reflector.Config[[]byte, *routes.Route]{Name: "routes", Source: src, ...})
//				return err
//			}),
//		),
//	)
//
// # Metrics
//
// Every metric is labelled with the reflector's name (Config.Name, label
// "reflector"):
//
//	steadystate_reflector_events_total                  counter: events received from the source
//	steadystate_reflector_batches_total                 counter: batches committed (relists included)
//	steadystate_reflector_batch_objects                 histogram: objects per batch
//	steadystate_reflector_lag_seconds                   histogram: how long a batch's oldest event waited
//	steadystate_reflector_relists_total{reason}         counter: lists of the source (initial, watch-lost, resync)
//	steadystate_reflector_rejected_total                counter: values that the transform rejected
package reflectorcell

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/job"
	"github.com/steadystate/steadystate/reflector"
	"github.com/steadystate/steadystate/statedb"
)

// MetricsCell provides the *PrometheusMetrics that every reflector of the
// hive reports to, registered with the hive's registry. Include it once.
var MetricsCell = cell.Module("reflector-metrics", "Reflector metrics",
	cell.Provide(NewPrometheusMetrics),
)

// Params are what Register takes from the module it is invoked in.
type Params struct {
	cell.In

	DB      *statedb.DB
	Jobs    job.Group
	Logger  *slog.Logger
	Metrics *PrometheusMetrics `optional:"true"`
}

// Register creates a reflector for cfg with reflector.New (which registers
// the table's initializer at once, so nothing prunes against a table not
// yet listed) and runs it as the job "reflect-<Name>" of the module of p.
// Unset fields of cfg are filled in: Logger with the module's, Metrics with
// MetricsCell's (when the hive includes it), and Health with the scope
// "reflector" under the job's.
func Register[In, Obj any](p Params, cfg reflector.Config[In, Obj]) (*reflector.Reflector[In, Obj], error) {
	health := fillIn(p, &cfg.Logger, &cfg.Metrics, &cfg.Health)
	r, err := reflector.New(p.DB, cfg)
	if err != nil {
		return nil, err
	}
	return r, addJob(p, cfg.Name, health, r.Run)
}

// RegisterMulti is Register of a reflector of several tables
// (reflector.NewMulti), which commits each source revision to all of them
// at once.
func RegisterMulti[In any](p Params, cfg reflector.MultiConfig[In]) (*reflector.Multi[In], error) {
	health := fillIn(p, &cfg.Logger, &cfg.Metrics, &cfg.Health)
	m, err := reflector.NewMulti(p.DB, cfg)
	if err != nil {
		return nil, err
	}
	return m, addJob(p, cfg.Name, health, m.Run)
}

// fillIn sets a config's unset logger, metrics and health; it returns the
// health scope to open when the job starts (nil if the config had one).
func fillIn(p Params, logger **slog.Logger, metrics *reflector.Metrics, health *reflector.Health) *cell.PendingScope {
	if *logger == nil {
		*logger = p.Logger
	}
	if *metrics == nil && p.Metrics != nil {
		*metrics = p.Metrics
	}
	if *health != nil {
		return nil
	}
	pending := &cell.PendingScope{}
	*health = pending
	return pending
}

// addJob runs run as the job "reflect-<name>" of p's module, with the
// reflector's health scope under the job's.
func addJob(p Params, name string, health *cell.PendingScope, run func(context.Context) error) error {
	return p.Jobs.Add(job.WithScope("reflect-"+name, "reflector", health, run))
}

// PrometheusMetrics is the reflector.Metrics that reports to Prometheus.
type PrometheusMetrics struct {
	reflector.NopMetrics // a method added to reflector.Metrics is a no-op until implemented here

	events, batches, rejected *prometheus.CounterVec
	relists                   *prometheus.CounterVec
	objects, lag              *prometheus.HistogramVec
}

var _ reflector.Metrics = (*PrometheusMetrics)(nil)

// NewPrometheusMetrics creates the metrics and registers them with reg.
func NewPrometheusMetrics(reg prometheus.Registerer) (*PrometheusMetrics, error) {
	const ns, sub = "steadystate", "reflector"
	label := []string{"reflector"}
	m := &PrometheusMetrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "events_total",
			Help: "Events received from the source."}, label),
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "batches_total",
			Help: "Batches committed to the table, relists included."}, label),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "rejected_total",
			Help: "Values of the source that the transform rejected."}, label),
		relists: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "relists_total",
			Help: "Lists of the source, by reason (initial, watch-lost, resync)."}, []string{"reflector", "reason"}),
		objects: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "batch_objects",
			Help: "Objects per committed batch.", Buckets: prometheus.ExponentialBuckets(1, 4, 10)}, label),
		lag: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "lag_seconds",
			Help: "How long the oldest event of a batch waited for its commit.", Buckets: prometheus.ExponentialBuckets(1e-4, 4, 10)}, label),
	}
	for _, c := range []prometheus.Collector{m.events, m.batches, m.rejected, m.relists, m.objects, m.lag} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Events implements reflector.Metrics.
func (m *PrometheusMetrics) Events(r string, n int) { m.events.WithLabelValues(r).Add(float64(n)) }

// BatchCommitted implements reflector.Metrics.
func (m *PrometheusMetrics) BatchCommitted(r string, n int, lag time.Duration) {
	m.batches.WithLabelValues(r).Inc()
	m.objects.WithLabelValues(r).Observe(float64(n))
	m.lag.WithLabelValues(r).Observe(lag.Seconds())
}

// Relisted implements reflector.Metrics.
func (m *PrometheusMetrics) Relisted(r, reason string) { m.relists.WithLabelValues(r, reason).Inc() }

// Rejected implements reflector.Metrics.
func (m *PrometheusMetrics) Rejected(r string, n int) { m.rejected.WithLabelValues(r).Add(float64(n)) }
