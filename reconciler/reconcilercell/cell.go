package reconcilercell

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/job"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// MetricsCell provides the *PrometheusMetrics that every reconciler of the
// hive reports to (Register picks it up), registered with the hive's
// registry. Include it once per hive.
var MetricsCell = cell.Module("reconciler-metrics", "Reconciler metrics",
	cell.Provide(NewPrometheusMetrics),
)

// Params are what Register takes from the module it is invoked in.
type Params struct {
	cell.In

	DB         *statedb.DB
	Jobs       job.Group
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Metrics    *PrometheusMetrics `optional:"true"`
}

// Register creates a reconciler for cfg with reconciler.New and runs it as
// the job "reconcile-<Name>" of the module of p, which starts and stops it
// with the hive. Use it from an Invoke (see the package doc).
//
// Fields of cfg that are set are kept. Of the unset ones it fills in:
//
//   - Logger: the module's logger (p.Logger).
//   - Metrics: MetricsCell's PrometheusMetrics (p.Metrics), when the hive
//     includes MetricsCell; else the reconciler's default, NopMetrics.
//   - Health: the health scope "reconciler" under the job's scope, which is
//     itself under the module's, so the health tree reads module → job →
//     reconciler. The job's scope reads OK while the reconciler runs and
//     Stopped after; the reconciler's own scope reads what Config.Health
//     describes.
//
// It also registers the table's objects by status
// (steadystate_reconciler_objects, see NewStatusCollector) with the hive's
// registry (p.Registerer). Errors: those of reconciler.New (wrapping
// reconciler.ErrInvalidConfig), and the registry's (a
// prometheus.AlreadyRegisteredError) when a reconciler of the same name and
// table is registered already.
func Register[Obj any](p Params, cfg reconciler.Config[Obj]) (reconciler.Reconciler[Obj], error) {
	if cfg.Logger == nil {
		cfg.Logger = p.Logger
	}
	if cfg.Metrics == nil && p.Metrics != nil {
		cfg.Metrics = p.Metrics
	}
	var health *cell.PendingScope
	if cfg.Health == nil {
		health = &cell.PendingScope{}
		cfg.Health = health
	}
	r, err := reconciler.New(p.DB, cfg)
	if err != nil {
		return nil, err
	}
	if err := p.Registerer.Register(NewStatusCollector[Obj](cfg.Name, p.DB, cfg.Table, cfg.GetObjectStatus)); err != nil {
		return nil, fmt.Errorf("reconciler %q of table %q: registering steadystate_reconciler_objects: %w", cfg.Name, cfg.Table.Name(), err)
	}
	err = p.Jobs.Add(job.WithScope("reconcile-"+cfg.Name, "reconciler", health, r.Run))
	if err != nil {
		return nil, err
	}
	return r, nil
}
