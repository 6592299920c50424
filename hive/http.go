package hive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// HTTPConfig configures HTTPServer.
type HTTPConfig struct {
	// MetricsAddr is the listen address (flag --metrics-addr, default ""
	// which disables the server).
	MetricsAddr string
}

// Flags implements cell.Flagger.
func (def HTTPConfig) Flags(fs *pflag.FlagSet) {
	fs.String("metrics-addr", def.MetricsAddr, "address to serve /metrics, /healthz, /livez and /readyz on, e.g. :9090 (empty: off)")
}

// HTTPServer is a module that serves over HTTP, when --metrics-addr is
// set:
//
//	/metrics  the hive's Prometheus registry
//	/healthz  the health tree as JSON; 200 only when its root is OK,
//	          else 503: Degraded, Unknown (a scope that never reported,
//	          or the hive still starting) or Stopped (stopping, or
//	          nothing but finished jobs)
//	/livez    200 "ok" while the process serves at all
//	/readyz   200 "ok" when every ReadinessCheck passes, else 503 with
//	          the checks that fail, one per line
//
// It provides *HTTPEndpoint.
//
// It is the hive's one HTTP server: other cells add handlers to it
// (HTTPHandler) and listeners to serve them on, such as a unix socket
// (HTTPListener), by providing them with HTTPOut. It then runs when
// --metrics-addr is set or some cell added a listener, and serves every
// handler on every listener, with one lifecycle: it listens at start (a
// listener that fails fails the start), and at stop shuts down, ending
// requests still in flight (their contexts are cancelled, so streams end).
var HTTPServer = cell.Module("http", "The HTTP server: metrics, health, readiness and the cells' handlers",
	cell.Config(HTTPConfig{}),
	cell.Provide(newHTTPEndpoint),
	cell.Invoke(startHTTPServer),
)

// startHTTPServer asks for the endpoint, so that it is built (and its
// lifecycle hooks registered) even when no other cell uses it.
func startHTTPServer(*HTTPEndpoint) {}

// HTTPHandler is a handler that a cell adds to the hive's HTTP server (see
// HTTPServer), beside /metrics and /healthz.
type HTTPHandler struct {
	// Pattern is an http.ServeMux pattern, such as "GET /status" or
	// "/statedb/". A pattern that conflicts with another fails the hive's
	// construction.
	Pattern string
	Handler http.Handler
}

// ReadinessCheck is a condition of /readyz that a cell adds (see HTTPOut):
// Ready returns nil when the cell is ready, else why not.
type ReadinessCheck struct {
	// Name names the check in /readyz's answer.
	Name  string
	Ready func() error
}

// HTTPListener is a listener that a cell adds to the hive's HTTP server
// (see HTTPServer): the server serves all its handlers on it too.
type HTTPListener struct {
	// Name names the listener in errors and logs, e.g. "status socket".
	Name string
	// Listen opens the listener when the server starts; the server closes
	// it when it stops.
	Listen func(ctx context.Context) (net.Listener, error)
}

// HTTPOut is what a constructor returns to add handlers and listeners to
// the hive's HTTP server: embed it, or return it as is.
type HTTPOut struct {
	cell.Out

	Handlers  []HTTPHandler    `group:"hive-http-handlers,flatten"`
	Listeners []HTTPListener   `group:"hive-http-listeners,flatten"`
	Ready     []ReadinessCheck `group:"hive-readiness-checks,flatten"`
}

// HTTPEndpoint is the running HTTP server.
type HTTPEndpoint struct {
	cfg       HTTPConfig
	reg       *prometheus.Registry
	tree      *health.Tree
	log       *slog.Logger
	mux       *http.ServeMux
	listeners []HTTPListener
	ready     []ReadinessCheck

	mu     sync.Mutex
	ln     net.Listener // the --metrics-addr listener
	srv    *http.Server
	served sync.WaitGroup // one Serve per listener
}

type endpointParams struct {
	cell.In

	Config    HTTPConfig
	Lifecycle cell.Lifecycle
	Registry  *prometheus.Registry
	Tree      *health.Tree
	Log       *slog.Logger
	Handlers  []HTTPHandler    `group:"hive-http-handlers"`
	Listeners []HTTPListener   `group:"hive-http-listeners"`
	Ready     []ReadinessCheck `group:"hive-readiness-checks"`
}

func newHTTPEndpoint(p endpointParams) (*HTTPEndpoint, error) {
	e := &HTTPEndpoint{cfg: p.Config, reg: p.Registry, tree: p.Tree, log: p.Log, listeners: p.Listeners, ready: p.Ready}
	mux, err := e.newMux(p.Handlers)
	if err != nil {
		return nil, err
	}
	e.mux = mux
	if p.Config.MetricsAddr != "" || len(p.Listeners) > 0 {
		p.Lifecycle.Append(e)
	}
	return e, nil
}

// newMux builds the server's handlers; a conflicting pattern is an error
// (http.ServeMux panics on one).
func (e *HTTPEndpoint) newMux(handlers []HTTPHandler) (mux *http.ServeMux, err error) {
	mux = http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{Registry: e.reg}))
	mux.HandleFunc("/healthz", e.serveHealth)
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", e.serveReady)
	for _, h := range handlers {
		func() {
			defer func() {
				if r := recover(); r != nil {
					err = errors.Join(err, fmt.Errorf("hive HTTP server: handler %q: %v", h.Pattern, r))
				}
			}()
			mux.Handle(h.Pattern, h.Handler)
		}()
	}
	return mux, err
}

// Addr returns the address the server listens on, or "" when it is off or
// not started.
func (e *HTTPEndpoint) Addr() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ln == nil {
		return ""
	}
	return e.ln.Addr().String()
}

// HookName implements cell.HookNamer.
func (e *HTTPEndpoint) HookName() string {
	name := "HTTP server"
	if e.cfg.MetricsAddr != "" {
		name += " " + e.cfg.MetricsAddr
	}
	for _, l := range e.listeners {
		name += ", " + l.Name
	}
	return name
}

// Start opens --metrics-addr (if set) and every added listener, so that
// a bad address fails the start, and serves on each in the background.
func (e *HTTPEndpoint) Start(ctx context.Context) error {
	var lns []net.Listener
	fail := func(err error) error {
		for _, ln := range lns {
			ln.Close()
		}
		return err
	}
	var metricsLn net.Listener
	if e.cfg.MetricsAddr != "" {
		ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", e.cfg.MetricsAddr)
		if err != nil {
			return err
		}
		metricsLn = ln
		lns = append(lns, ln)
	}
	for _, l := range e.listeners {
		ln, err := l.Listen(ctx)
		if err != nil {
			return fail(fmt.Errorf("%s: %w", l.Name, err))
		}
		lns = append(lns, ln)
	}
	base, cancel := context.WithCancel(context.Background())
	srv := &http.Server{
		Handler:           e.mux,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	// Requests still running when Shutdown starts (streams, say) see their
	// context cancelled, so that Stop does not wait for them.
	srv.RegisterOnShutdown(cancel)
	e.mu.Lock()
	e.ln, e.srv = metricsLn, srv
	e.mu.Unlock()
	for _, ln := range lns {
		e.served.Go(func() {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				e.log.Error("HTTP server failed", "addr", ln.Addr().String(), "error", err)
			}
		})
		e.log.Info("HTTP server listening", "addr", ln.Addr().String())
	}
	return nil
}

// Stop shuts the server down and waits for it.
func (e *HTTPEndpoint) Stop(ctx context.Context) error {
	e.mu.Lock()
	srv := e.srv
	e.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Shutdown(ctx)
	if err != nil {
		_ = srv.Close()
	}
	e.served.Wait()
	return err
}

// serveHealth answers the health tree: 200 only when its root is OK, so
// that a probe or a load balancer that reads only the code sees trouble,
// and also what the tree does not know (Unknown) as not healthy.
func (e *HTTPEndpoint) serveHealth(w http.ResponseWriter, _ *http.Request) {
	st := e.tree.Snapshot()
	w.Header().Set("Content-Type", "application/json")
	if st.Level != health.LevelOK {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(st); err != nil {
		e.log.Warn("Writing health failed", "error", err)
	}
}

// serveReady runs every readiness check: 200 "ok" when all pass, else 503
// and one line per failing check.
func (e *HTTPEndpoint) serveReady(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	var notReady []string
	for _, c := range e.ready {
		if err := c.Ready(); err != nil {
			notReady = append(notReady, c.Name+": "+err.Error())
		}
	}
	if len(notReady) == 0 {
		fmt.Fprintln(w, "ok")
		return
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	for _, line := range notReady {
		fmt.Fprintln(w, line)
	}
}
