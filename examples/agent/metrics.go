package main

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/steadystate/steadystate/reflector/filesource"
)

// The agent's own metrics (the tables', reconcilers', health's and jobs'
// are their packages'):
//
//	steadystate_agent_desired_loads_total{result}   versions of the desired
//	    file applied (result="applied") or rejected ("rejected": unreadable,
//	    empty, not parsing or not validating; once per distinct problem)
//	steadystate_agent_desired_deferred_total        reads put off because the
//	    file was still being written (see watchFile)
//	steadystate_agent_desired_last_applied_timestamp_seconds
//	    when a desired file was last applied (Unix time; 0 before the first)

// Values of the result label of steadystate_agent_desired_loads_total.
const (
	loadApplied  = "applied"
	loadRejected = "rejected"
)

type loaderMetrics struct {
	filesource.NopMetrics // a method added to filesource.Metrics is a no-op until implemented here

	loads       *prometheus.CounterVec
	deferred    prometheus.Counter
	lastApplied prometheus.Gauge
}

// newLoaderMetrics registers the loader's metrics with reg.
func newLoaderMetrics(reg prometheus.Registerer) (*loaderMetrics, error) {
	m := &loaderMetrics{
		loads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "steadystate_agent_desired_loads_total",
			Help: "Versions of the desired-state file applied or rejected, by result.",
		}, []string{"result"}),
		deferred: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "steadystate_agent_desired_deferred_total",
			Help: "Reads of the desired-state file put off because it was still being written.",
		}),
		lastApplied: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "steadystate_agent_desired_last_applied_timestamp_seconds",
			Help: "When a desired-state file was last applied, in seconds since the Unix epoch.",
		}),
	}
	// Both results exist from the start, at 0, so that rates work.
	m.loads.WithLabelValues(loadApplied)
	m.loads.WithLabelValues(loadRejected)
	for _, c := range []prometheus.Collector{m.loads, m.deferred, m.lastApplied} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("agent metrics: %w", err)
		}
	}
	return m, nil
}
