package reconciler

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/dig"

	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/job"
	"github.com/steadystate/steadystate/statedb"
)

// MetricsCell provides the *PrometheusMetrics that every reconciler of the
// hive reports to, registered with the hive's own registry. Include it once
// (RegisterParams picks it up when present).
var MetricsCell = cell.Module("reconciler-metrics", "Reconciler metrics",
	cell.Provide(NewPrometheusMetrics),
)

// Params are what Register takes from the module it is invoked in.
type Params struct {
	dig.In

	DB         *statedb.DB
	Jobs       job.Group
	Health     cell.Health
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Metrics    *PrometheusMetrics `optional:"true"`
}

// Register creates a reconciler for cfg within the module of p and runs it
// as a job of that module: its health is a scope of the module's health,
// its logs carry the module's logger, its metrics go to MetricsCell's
// metrics (when included) and the objects-by-status count to the hive's
// registry. Use it from an Invoke:
//
//	cell.Invoke(func(p reconciler.Params, t statedb.RWTable[*Route], target *RouteTarget) error {
//		_, err := reconciler.Register(p, reconciler.Config[*Route]{Name: "routes", Table: t, Target: target, ...})
//		return err
//	})
//
// Fields of cfg that are set are kept; Health, Logger and Metrics are filled
// in from p when unset.
func Register[Obj any](p Params, cfg Config[Obj]) (Reconciler[Obj], error) {
	if cfg.Logger == nil {
		cfg.Logger = p.Logger
	}
	if cfg.Metrics == nil && p.Metrics != nil {
		cfg.Metrics = p.Metrics
	}
	r, err := New(p.DB, cfg)
	if err != nil {
		return nil, err
	}
	if cfg.GetObjectStatus != nil && cfg.Table != nil {
		if err := p.Registerer.Register(NewStatusCollector[Obj](cfg.Name, p.DB, cfg.Table, cfg.GetObjectStatus)); err != nil {
			return nil, err
		}
	}
	p.Jobs.Add(job.OneShot("reconcile-"+cfg.Name, func(ctx context.Context, health cell.Health) error {
		rec := r.(*reconciler[Obj])
		if rec.cfg.Health == nil {
			rec.cfg.Health = health
		}
		return r.Run(ctx)
	}))
	return r, nil
}
