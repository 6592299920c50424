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

	"github.com/steadystate/steadystate/examples/iptables"
	"github.com/steadystate/steadystate/examples/routes"
	"github.com/steadystate/steadystate/examples/sysctl"
	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/health"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// The status API, on a unix socket (--socket), served by the hive's HTTP
// server (hive.MetricsServer) with its lifecycle, beside its own handlers:
//
//	GET /status        statusReport: the health tree and per-table counts
//	GET /statedb/...   the statedb inspection API (see statedb.NewHTTPHandler)
//	GET /healthz       the health tree (the hive's)
//	GET /metrics       Prometheus metrics (the hive's)

// statusReport is the answer of GET /status.
type statusReport struct {
	Health health.Status `json:"health"`
	Tables []tableStatus `json:"tables"`
}

// tableStatus counts a table's objects by reconciliation status.
type tableStatus struct {
	Name     string         `json:"name"`
	Objects  int            `json:"objects"`
	ByStatus map[string]int `json:"byStatus"`
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
	Sysctls statedb.Table[*sysctl.Sysctl]
	Routes  statedb.Table[*routes.Route]
	Rules   statedb.Table[*iptables.Rule]
}

// newAPI adds the status API's handlers and its socket to the hive's HTTP
// server.
func newAPI(p apiParams) hive.HTTPOut {
	report := func(w http.ResponseWriter, _ *http.Request) {
		txn := p.DB.ReadTxn()
		writeJSON(w, statusReport{
			Health: p.Health.Snapshot(),
			Tables: []tableStatus{
				countByStatus(txn, p.Sysctls, (*sysctl.Sysctl).GetStatus),
				countByStatus(txn, p.Routes, (*routes.Route).GetStatus),
				countByStatus(txn, p.Rules, (*iptables.Rule).GetStatus),
			},
		})
	}
	return hive.HTTPOut{
		Handlers: []hive.HTTPHandler{
			{Pattern: "GET /status", Handler: http.HandlerFunc(report)},
			{Pattern: "/statedb/", Handler: http.StripPrefix("/statedb", statedb.NewHTTPHandler(p.DB))},
		},
		Listeners: []hive.HTTPListener{{
			Name:   "status API socket " + p.Config.Socket,
			Listen: func(ctx context.Context) (net.Listener, error) { return listenSocket(ctx, p.Config.Socket, p.Log) },
		}},
	}
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
