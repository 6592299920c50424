package hive

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"

	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/health"
)

// MetricsConfig configures MetricsServer.
type MetricsConfig struct {
	// MetricsAddr is the listen address (flag --metrics-addr, default ""
	// which disables the server).
	MetricsAddr string
}

// Flags implements cell.Flagger.
func (def MetricsConfig) Flags(fs *pflag.FlagSet) {
	fs.String("metrics-addr", def.MetricsAddr, "address to serve /metrics and /healthz on, e.g. :9090 (empty: off)")
}

// MetricsServer is a module that serves the hive's Prometheus registry at
// /metrics and its health tree as JSON at /healthz over HTTP, when
// --metrics-addr is set. It provides *MetricsEndpoint.
var MetricsServer = cell.Module("metrics", "Prometheus metrics and health over HTTP",
	cell.Config(MetricsConfig{}),
	cell.Provide(newMetricsEndpoint),
	cell.Invoke(func(*MetricsEndpoint) {}),
)

// MetricsEndpoint is the running metrics server.
type MetricsEndpoint struct {
	cfg  MetricsConfig
	reg  *prometheus.Registry
	tree *health.Tree
	log  *slog.Logger

	mu   sync.Mutex
	ln   net.Listener
	srv  *http.Server
	done chan struct{}
}

func newMetricsEndpoint(cfg MetricsConfig, lc cell.Lifecycle, reg *prometheus.Registry, tree *health.Tree, log *slog.Logger) *MetricsEndpoint {
	e := &MetricsEndpoint{cfg: cfg, reg: reg, tree: tree, log: log}
	if cfg.MetricsAddr != "" {
		lc.Append(e)
	}
	return e
}

// Addr returns the address the server listens on, or "" when it is off or
// not started.
func (e *MetricsEndpoint) Addr() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ln == nil {
		return ""
	}
	return e.ln.Addr().String()
}

// HookName implements cell.HookNamer.
func (e *MetricsEndpoint) HookName() string { return "metrics server " + e.cfg.MetricsAddr }

// Start listens (so a bad address fails the start) and serves in the
// background.
func (e *MetricsEndpoint) Start(ctx context.Context) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", e.cfg.MetricsAddr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{Registry: e.reg}))
	mux.HandleFunc("/healthz", e.serveHealth)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	e.mu.Lock()
	e.ln, e.srv, e.done = ln, srv, done
	e.mu.Unlock()
	go func() {
		defer close(done)
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			e.log.Error("Metrics server failed", "error", err)
		}
	}()
	e.log.Info("Serving metrics", "addr", ln.Addr().String())
	return nil
}

// Stop shuts the server down and waits for it.
func (e *MetricsEndpoint) Stop(ctx context.Context) error {
	e.mu.Lock()
	srv, done := e.srv, e.done
	e.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Shutdown(ctx)
	if err != nil {
		_ = srv.Close()
	}
	<-done
	return err
}

func (e *MetricsEndpoint) serveHealth(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(e.tree.Snapshot()); err != nil {
		e.log.Warn("Writing health failed", "error", err)
	}
}
