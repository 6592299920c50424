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
	"time"

	"github.com/steadystate/steadystate/examples/iptables"
	"github.com/steadystate/steadystate/examples/routes"
	"github.com/steadystate/steadystate/examples/sysctl"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/health"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// The status API, on a unix socket:
//
//	GET /status        statusReport: the health tree and per-table counts
//	GET /health        the health tree
//	GET /statedb/...   the statedb inspection API (see statedb.NewHTTPHandler)

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

	Config    AgentConfig
	DB        *statedb.DB
	Health    *health.Tree
	Lifecycle cell.Lifecycle
	Log       *slog.Logger
	Sysctls   statedb.Table[*sysctl.Sysctl]
	Routes    statedb.Table[*routes.Route]
	Rules     statedb.Table[*iptables.Rule]
}

// apiServer serves the status API.
type apiServer struct {
	p   apiParams
	srv *http.Server
	ln  net.Listener
	err chan error
}

func newAPIServer(p apiParams) *apiServer {
	s := &apiServer{p: p}
	mux := http.NewServeMux()
	mux.Handle("/statedb/", http.StripPrefix("/statedb", statedb.NewHTTPHandler(p.DB)))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, p.Health.Snapshot())
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, s.report())
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	p.Lifecycle.Append(s)
	return s
}

func (s *apiServer) report() statusReport {
	txn := s.p.DB.ReadTxn()
	return statusReport{
		Health: s.p.Health.Snapshot(),
		Tables: []tableStatus{
			countByStatus(txn, s.p.Sysctls, (*sysctl.Sysctl).GetStatus),
			countByStatus(txn, s.p.Routes, (*routes.Route).GetStatus),
			countByStatus(txn, s.p.Rules, (*iptables.Rule).GetStatus),
		},
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// HookName names the hook in the cell tree and in errors.
func (s *apiServer) HookName() string { return "status-api" }

// Start listens on the socket (replacing a stale socket file) and serves.
func (s *apiServer) Start(context.Context) error {
	path := s.p.Config.Socket
	if conn, err := net.Dial("unix", path); err == nil {
		conn.Close()
		return fmt.Errorf("--socket %s: another agent is serving there", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("--socket %s: removing stale socket: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("--socket %s: %w", path, err)
	}
	s.ln = ln
	s.err = make(chan error, 1)
	go func() { s.err <- s.srv.Serve(ln) }()
	s.p.Log.Info("Status API listening", "socket", path)
	return nil
}

// Stop closes the server (streams included) and removes the socket.
func (s *apiServer) Stop(ctx context.Context) error {
	// Streams (db watch) never end by themselves: give requests in flight
	// a moment, then close what is left.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var err error
	if s.srv.Shutdown(ctx) != nil {
		err = s.srv.Close()
	}
	if srvErr := <-s.err; srvErr != nil && !errors.Is(srvErr, http.ErrServerClosed) {
		err = errors.Join(err, srvErr)
	}
	os.Remove(s.p.Config.Socket)
	return err
}
