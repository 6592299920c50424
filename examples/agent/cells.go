package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/steadystate/steadystate/examples/internal/netnsutil"
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

// agentCells assembles the agent. ns is the network namespace to manage,
// decided (and created, for the sandbox) before the hive is built.
func agentCells(ns *netnsutil.NS) []cell.Cell {
	return []cell.Cell{
		statedbcell.Cell,
		hive.MetricsServer,
		reconcilercell.MetricsCell,
		cell.Module("agent", "The example node agent",
			cell.Config(defaultConfig()),
			cell.Provide(func() netnsutil.NS { return *ns }),

			cell.Module("desired", "Desired state: tables, file loader, progress log",
				statedbcell.TableCell(sysctl.TableName, sysctl.NameIndex, sysctl.StatusIndex),
				statedbcell.TableCell(routes.TableName, routes.PrimaryIndex, routes.StatusIndex),
				statedbcell.TableCell(iptables.TableName, iptables.KeyIndex, iptables.StatusIndex),
				cell.Invoke(registerLoader),
				cell.Invoke(func(jobs job.Group, db *statedb.DB, log *slog.Logger,
					s statedb.Table[*sysctl.Sysctl], r statedb.Table[*routes.Route], ru statedb.Table[*iptables.Rule]) error {
					return errors.Join(
						watchProgress(jobs, db, s, log, (*sysctl.Sysctl).GetStatus, describeSysctl),
						watchProgress(jobs, db, r, log, (*routes.Route).GetStatus, describeRoute),
						watchProgress(jobs, db, ru, log, (*iptables.Rule).GetStatus, describeRule))
				}),

				cell.Module("sysctl", "Reconciles sysctls with /proc/sys",
					cell.Invoke(func(p reconcilercell.Params, cfg AgentConfig, ns netnsutil.NS, t statedb.RWTable[*sysctl.Sysctl]) error {
						// Outside --netns host only net.* sysctls: the others
						// are the whole machine's, in any namespace.
						target := sysctl.NewTarget(sysctl.TargetConfig{NetNS: ns, NetworkOnly: cfg.NetNS != netnsHost})
						_, err := reconcilercell.Register(p, withInterval(sysctl.ReconcilerConfig(t, target), cfg))
						return err
					}),
				),
				cell.Module("routes", "Reconciles routes over rtnetlink",
					cell.Invoke(func(p reconcilercell.Params, cfg AgentConfig, ns netnsutil.NS, t statedb.RWTable[*routes.Route], lc cell.Lifecycle) error {
						target, err := routes.NewTarget(routes.TargetConfig{NetNS: ns})
						if err != nil {
							return err
						}
						lc.Append(cell.Hook{OnStop: func(ctx context.Context) error { target.Close(); return nil }})
						_, err = reconcilercell.Register(p, withInterval(routes.ReconcilerConfig(t, target), cfg))
						return err
					}),
				),
				cell.Module("iptables", "Reconciles iptables rules with iptables-restore",
					cell.Invoke(func(p reconcilercell.Params, cfg AgentConfig, ns netnsutil.NS, t statedb.RWTable[*iptables.Rule]) error {
						target, err := iptables.NewTarget(iptables.TargetConfig{NetNS: ns, Rules: t})
						if err != nil {
							return err
						}
						_, err = reconcilercell.Register(p, withInterval(iptables.ReconcilerConfig(t, target), cfg))
						return err
					}),
				),
			),
			cell.Module("api", "Status API on a unix socket",
				cell.Provide(newAPIServer),
				cell.Invoke(func(*apiServer) {}),
			),
		),
	}
}

// withInterval sets the agent's full reconciliation interval on a
// reconciler config.
func withInterval[Obj any](rc reconciler.Config[Obj], cfg AgentConfig) reconciler.Config[Obj] {
	rc.FullReconciliationInterval = cfg.FullReconciliationInterval
	return rc
}
