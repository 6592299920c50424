package main

import (
	"errors"
	"log/slog"

	"github.com/steadystate/steadystate/examples/iptables"
	"github.com/steadystate/steadystate/examples/routes"
	"github.com/steadystate/steadystate/examples/sysctl"
	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/job"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilercell"
	"github.com/steadystate/steadystate/statedb"
	"github.com/steadystate/steadystate/statedb/statedbcell"
)

// agentCells assembles the agent from the example targets' cells: it gives
// them their target configs (all in the namespace of --netns) and its
// intervals, and adds the desired-state loader, the progress log and the
// status API.
func agentCells() []cell.Cell {
	return []cell.Cell{
		statedbcell.Cell,
		hive.MetricsServer,
		reconcilercell.MetricsCell,
		cell.Module("agent", "The example node agent",
			cell.Config(defaultConfig()),
			cell.Provide(newNamespace, sysctlTarget, routesTarget, iptablesTarget),

			cell.Decorate(withIntervals[*sysctl.Sysctl], sysctl.Cell),
			cell.Decorate(withIntervals[*routes.Route], routes.Cell),
			cell.Decorate(withIntervals[*iptables.Rule], iptables.Cell),

			cell.Module("desired", "Desired state: the file loader and a progress log",
				cell.Invoke(registerLoader),
				cell.Invoke(func(jobs job.Group, db *statedb.DB, log *slog.Logger,
					s statedb.Table[*sysctl.Sysctl], r statedb.Table[*routes.Route], ru statedb.Table[*iptables.Rule]) error {
					return errors.Join(
						watchProgress(jobs, db, s, log, (*sysctl.Sysctl).GetStatus, describeSysctl),
						watchProgress(jobs, db, r, log, (*routes.Route).GetStatus, describeRoute),
						watchProgress(jobs, db, ru, log, (*iptables.Rule).GetStatus, describeRule))
				}),
			),
			cell.Module("api", "Status API on a unix socket, served by the hive's HTTP server",
				cell.Provide(newAPI),
			),
		),
	}
}

// sysctlTarget manages the agent's namespace. Outside --netns host only
// net.* sysctls: the others are the whole machine's, in any namespace.
func sysctlTarget(ns *Namespace, cfg AgentConfig) sysctl.TargetConfig {
	return sysctl.TargetConfig{NetNS: ns.Path, NetworkOnly: cfg.NetNS != netnsHost}
}

func routesTarget(ns *Namespace) routes.TargetConfig {
	return routes.TargetConfig{NetNS: ns.Path}
}

// iptablesTarget leaves Rules to iptables.Cell, which uses its table.
func iptablesTarget(ns *Namespace) iptables.TargetConfig {
	return iptables.TargetConfig{NetNS: ns.Path}
}

// withIntervals sets the agent's prune and refresh intervals on a
// reconciler config (a decorator of the example cells').
func withIntervals[Obj any](rc reconciler.Config[Obj], cfg AgentConfig) reconciler.Config[Obj] {
	rc.FullReconciliationInterval = cfg.FullReconciliationInterval
	rc.RefreshInterval = cfg.RefreshInterval
	return rc
}
