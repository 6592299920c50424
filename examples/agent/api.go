package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/steadystate/steadystate/etcd"
	"github.com/steadystate/steadystate/etcd/fleetcell"
	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/health"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// The status API, on a unix socket (--socket), served by the hive's HTTP
// server (hive.HTTPServer) with its lifecycle, beside its own handlers:
//
//	GET /status        statusReport: the health tree and per-table counts
//	GET /statedb/...   the statedb inspection API (see statedb.NewHTTPHandler)
//	GET /healthz       the health tree (the hive's; 200 only when OK, 503
//	                   while starting, Degraded, Unknown or Stopped)
//	GET /livez         200 while the agent serves (the hive's)
//	GET /readyz        200 once ready (see agentReady), else 503 and why
//	GET /metrics       Prometheus metrics (the hive's)
//
// The same handlers are on --metrics-addr when it is set.

// statusReport is the answer of GET /status.
type statusReport struct {
	Health health.Status `json:"health"`
	Tables []tableStatus `json:"tables"`
	// Fleet is the node's status as last published to etcd (fleet mode).
	Fleet *etcd.NodeStatus `json:"fleet,omitempty"`
}

// tableStatus counts a table's objects by reconciliation status, with
// what its reconciler repaired and pruned since the agent started (from
// the reconciler's metrics; the agent does not count again) and the
// latest repairs of drift (what was changed back, and when), newest first.
type tableStatus struct {
	Name          string              `json:"name"`
	Objects       int                 `json:"objects"`
	ByStatus      map[string]int      `json:"byStatus"`
	DriftRepaired int                 `json:"driftRepaired"`
	Pruned        int                 `json:"pruned"`
	RecentRepairs []reconciler.Repair `json:"recentRepairs,omitempty"`
}

func countByStatus[Obj any](txn statedb.ReadTxn, t statedb.Table[Obj], getStatus func(Obj) reconciler.Status) tableStatus {
	ts := tableStatus{Name: t.Name(), Objects: t.NumObjects(txn), ByStatus: map[string]int{}}
	for kind, n := range reconciler.CountByStatus(txn, t, getStatus) {
		ts.ByStatus[kind.String()] = n
	}
	return ts
}

type apiParams struct {
	cell.In

	Config  AgentConfig
	DB      *statedb.DB
	Health  *health.Tree
	Log     *slog.Logger
	Kinds   kindsIn
	Loaded  *firstLoad
	Rounds  *firstRounds
	Metrics prometheus.Gatherer
	Fleet   *fleetcell.Node `optional:"true"` // in fleet mode
	Repairs *repairLogs
}

// newAPI adds the status API's handlers and its socket to the hive's HTTP
// server.
func newAPI(p apiParams) hive.HTTPOut {
	report := func(w http.ResponseWriter, _ *http.Request) {
		txn := p.DB.ReadTxn()
		var tables []tableStatus
		for _, k := range p.Kinds.sorted() {
			tables = append(tables, k.status(txn))
		}
		drift := counterByTable(p.Metrics, "steadystate_reconciler_drift_repaired_total")
		pruned := counterByTable(p.Metrics, "steadystate_reconciler_pruned_total")
		for i := range tables {
			tables[i].DriftRepaired, tables[i].Pruned = drift[tables[i].Name], pruned[tables[i].Name]
			tables[i].RecentRepairs, _ = p.Repairs.of(tables[i].Name).Latest()
		}
		rep := statusReport{Health: p.Health.Snapshot(), Tables: tables}
		if p.Fleet != nil {
			st := p.Fleet.Status()
			rep.Fleet = &st
		}
		writeJSON(w, rep)
	}
	return hive.HTTPOut{
		Handlers: []hive.HTTPHandler{
			{Pattern: "GET /status", Handler: http.HandlerFunc(report)},
			{Pattern: "/statedb/", Handler: http.StripPrefix("/statedb", statedb.NewHTTPHandler(p.DB))},
		},
		Ready: []hive.ReadinessCheck{{Name: "agent", Ready: agentReady(p)}},
		Listeners: []hive.HTTPListener{{
			Name: "status API socket " + p.Config.SocketPath(),
			Listen: func(ctx context.Context) (net.Listener, error) {
				return listenSocket(ctx, p.Config.SocketPath(), p.Log)
			},
		}},
	}
}

// agentReady is the agent's readiness: the desired file was applied to the
// tables once, every table is initialized, and the reconcilers have since
// taken every object at least once (none Pending or never reconciled;
// objects in Error count as tried). Once ready, it stays ready: a later
// change of the file is work, not unreadiness. Ready is firstRounds'
// channel closed: the first probe that finds the agent ready closes it
// (if the first-rounds job did not yet), so /readyz answers 200 from the
// moment READY=1 is sent to systemd (notify.go), and never before the
// prunes may run.
func agentReady(p apiParams) func() error {
	return func() error {
		select {
		case <-p.Rounds.Done():
			return nil
		default:
		}
		select {
		case <-p.Loaded.Done():
		default:
			if p.Fleet != nil {
				return fmt.Errorf("desired state from etcd not listed yet")
			}
			return fmt.Errorf("desired state from %s not applied yet", p.Config.Desired)
		}
		if err := kindsReady(p.DB.ReadTxn(), p.Kinds.sorted()); err != nil {
			return err
		}
		p.Rounds.close()
		return nil
	}
}

// untriedCount is notTried of one table, counted once per revision of
// the table. /readyz (polled often while an agent starts) and the
// first-rounds job (woken by every table's writes) ask again and again
// while a round of 50,000 routes runs and the table does not change; a
// count walks the status index's entries of every object not tried yet,
// 1-3 ms at 50,000, and a probe every 10 ms took a fifth of a core from
// the start it was waiting for.
type untriedCount[Obj any] struct {
	table     statedb.Table[Obj]
	getStatus func(Obj) reconciler.Status

	mu     sync.Mutex
	rev    statedb.Revision // of the table, when n was counted
	n      int
	known  bool
	counts int // how many times it counted (tests)
}

// count returns notTried of the table in txn.
func (u *untriedCount[Obj]) count(txn statedb.ReadTxn) int {
	rev := u.table.Revision(txn)
	u.mu.Lock()
	if u.known && u.rev == rev {
		n := u.n
		u.mu.Unlock()
		return n
	}
	u.mu.Unlock()
	n := notTried(txn, u.table, u.getStatus)
	u.mu.Lock()
	u.rev, u.n, u.known = rev, n, true
	u.counts++
	u.mu.Unlock()
	return n
}

// notTried counts the objects no reconciler has taken yet.
func notTried[Obj any](txn statedb.ReadTxn, t statedb.Table[Obj], getStatus func(Obj) reconciler.Status) int {
	n := 0
	for _, c := range reconciler.CountByStatus(txn, t, getStatus, reconciler.StatusKindUnset, reconciler.StatusKindPending) {
		n += c
	}
	return n
}

// counterByTable sums the counter family name by its label table.
func counterByTable(g prometheus.Gatherer, name string) map[string]int {
	out := map[string]int{}
	if g == nil {
		return out
	}
	families, _ := g.Gather()
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "table" {
					out[l.GetValue()] += int(m.GetCounter().GetValue())
				}
			}
		}
	}
	return out
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// listenSocket listens on the unix socket path, replacing a stale socket
// file but refusing one where another agent answers. The listener removes
// the file when it is closed.
func listenSocket(ctx context.Context, path string, log *slog.Logger) (net.Listener, error) {
	if conn, err := net.Dial("unix", path); err == nil {
		conn.Close()
		return nil, fmt.Errorf("--socket %s: another agent is serving there", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("--socket %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("--socket %s: removing stale socket: %w", path, err)
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("--socket %s: %w", path, err)
	}
	log.Info("Status API listening", "socket", path)
	return ln, nil
}
