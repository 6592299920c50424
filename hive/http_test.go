package hive_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/health"
	"github.com/steadystate/steadystate/hive/hivetest"
	"github.com/steadystate/steadystate/hive/job"
)

// unixGet gets path from the HTTP server on the unix socket sock.
func unixGet(t *testing.T, ctx context.Context, sock, path string) (string, error) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://hive"+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// Cells add handlers and a listener to the hive's HTTP server: it runs
// without --metrics-addr, serves their handlers and /healthz on their
// listener, and its stop ends a stream that is still running.
func TestHTTPHandlersAndListeners(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "api.sock")
	streaming := make(chan struct{})
	streamEnded := make(chan struct{})
	h := hive.New(
		hive.HTTPServer,
		cell.Module("api", "An API on a unix socket", cell.Provide(func(hl cell.Health) hive.HTTPOut {
			hl.OK("serving")
			return hive.HTTPOut{
				Handlers: []hive.HTTPHandler{
					{Pattern: "GET /hello", Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello") })},
					{Pattern: "GET /stream", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						defer close(streamEnded)
						w.WriteHeader(http.StatusOK)
						w.(http.Flusher).Flush()
						close(streaming)
						<-r.Context().Done()
					})},
				},
				Listeners: []hive.HTTPListener{{Name: "api socket", Listen: func(ctx context.Context) (net.Listener, error) {
					return (&net.ListenConfig{}).Listen(ctx, "unix", sock)
				}}},
			}
		}), cell.Invoke(func(*hive.HTTPEndpoint) {})),
	)
	ctx := context.Background()
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := unixGet(t, ctx, sock, "/hello"); err != nil || got != "hello" {
		t.Fatalf("GET /hello: %q, %v", got, err)
	}
	body, err := unixGet(t, ctx, sock, "/healthz")
	var st health.Status
	if err != nil || json.Unmarshal([]byte(body), &st) != nil || st.Level != health.LevelOK {
		t.Fatalf("GET /healthz: %v %q", err, body)
	}

	streamCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go unixGet(t, streamCtx, sock, "/stream")
	<-streaming
	stopCtx, stopCancel := context.WithTimeout(ctx, 10*time.Second)
	defer stopCancel()
	if err := h.Stop(stopCtx); err != nil {
		t.Fatalf("Stop with a stream open: %v", err)
	}
	select {
	case <-streamEnded:
	default:
		t.Fatal("the stream's handler still runs after Stop")
	}
	if _, err := net.Dial("unix", sock); err == nil {
		t.Fatal("the socket still answers after Stop")
	}
}

// A handler whose pattern conflicts with another fails the construction,
// and a listener that cannot listen fails the start, naming it.
func TestHTTPErrors(t *testing.T) {
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	conflict := hive.New(hive.HTTPServer, cell.Provide(func() hive.HTTPOut {
		return hive.HTTPOut{Handlers: []hive.HTTPHandler{{Pattern: "/healthz", Handler: ok}}}
	}))
	if err := conflict.Populate(); err == nil || !strings.Contains(err.Error(), `handler "/healthz"`) {
		t.Fatalf("Populate with a conflicting pattern: %v", err)
	}

	failing := hivetest.Logger(t, 0)
	h := hive.NewWithOptions(hive.Options{Logger: failing}, hive.HTTPServer, cell.Provide(func() hive.HTTPOut {
		return hive.HTTPOut{Listeners: []hive.HTTPListener{{Name: "broken socket", Listen: func(context.Context) (net.Listener, error) {
			return nil, errors.New("no such directory")
		}}}}
	}))
	if err := h.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "broken socket: no such directory") {
		t.Fatalf("Start with a failing listener: %v", err)
	}
}

// A Degraded scope under a job that reports "OK running" makes the job,
// its module and the root Degraded, in /healthz (answered with 503) and in
// the health gauge.
func TestHealthzEffectiveLevel(t *testing.T) {
	var ep *hive.HTTPEndpoint
	reported := make(chan struct{})
	hivetest.StartWithOptions(t, hivetest.Options{Flags: []string{"--metrics-addr=127.0.0.1:0"}},
		hive.HTTPServer,
		cell.Invoke(func(e *hive.HTTPEndpoint) { ep = e }),
		cell.Module("routes", "Routes", cell.Invoke(func(g job.Group) error {
			return g.Add(job.OneShot("reconcile", func(ctx context.Context, h cell.Health) error {
				h.NewScope("reconciler").Degraded("1 of 4 objects failing", errors.New("ENODEV"))
				close(reported)
				<-ctx.Done()
				return nil
			}))
		})),
	)
	<-reported
	var st health.Status
	code, body := getCode(t, "http://"+ep.Addr()+"/healthz")
	if code != http.StatusServiceUnavailable {
		t.Fatalf("/healthz while Degraded: HTTP %d, want 503", code)
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	mod := st.Children[0]
	job := mod.Children[0]
	if st.Level != health.LevelDegraded || mod.Level != health.LevelDegraded || job.Level != health.LevelDegraded || job.Message != "running" {
		t.Fatalf("/healthz: root %s, module %s, job %s %q; want Degraded at each", st.Level, mod.Level, job.Level, job.Message)
	}
	metrics := get(t, "http://"+ep.Addr()+"/metrics")
	if want := `steadystate_health_scopes{level="Degraded",module="routes"} 2`; !strings.Contains(metrics, want) {
		t.Fatalf("/metrics lacks %q:\n%s", want, metrics)
	}
}

// getCode gets url and returns the status code and the body.
func getCode(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// The probes: /livez answers 200 while the server runs; /readyz 503 with
// the failing checks' reasons until every ReadinessCheck passes; /healthz
// 200 only while the root is OK: 503 while a scope never reported
// (Unknown), while one is Degraded, and when all that is left is Stopped.
func TestProbes(t *testing.T) {
	var ep *hive.HTTPEndpoint
	var ready atomic.Bool
	var scope cell.Health
	hivetest.StartWithOptions(t, hivetest.Options{Flags: []string{"--metrics-addr=127.0.0.1:0"}},
		hive.HTTPServer,
		cell.Invoke(func(e *hive.HTTPEndpoint) { ep = e }),
		cell.Module("loader", "Loader",
			cell.Provide(func() hive.HTTPOut {
				return hive.HTTPOut{Ready: []hive.ReadinessCheck{
					{Name: "always", Ready: func() error { return nil }},
					{Name: "first load", Ready: func() error {
						if !ready.Load() {
							return errors.New("desired state not loaded yet")
						}
						return nil
					}},
				}}
			}),
			cell.Invoke(func(h cell.Health) { scope = h.NewScope("file") }),
		),
	)
	base := "http://" + ep.Addr()
	for _, tc := range []struct {
		path string
		code int
		body string
	}{
		{"/livez", 200, "ok\n"},
		{"/readyz", 503, "first load: desired state not loaded yet\n"},
	} {
		if code, body := getCode(t, base+tc.path); code != tc.code || body != tc.body {
			t.Errorf("GET %s: %d %q, want %d %q", tc.path, code, body, tc.code, tc.body)
		}
	}
	ready.Store(true)
	if code, body := getCode(t, base+"/readyz"); code != 200 || body != "ok\n" {
		t.Errorf("GET /readyz when ready: %d %q", code, body)
	}
	for _, step := range []struct {
		report func()
		code   int
		level  health.Level
	}{
		{func() {}, 503, health.LevelUnknown}, // the scope never reported
		{func() { scope.OK("loaded") }, 200, health.LevelOK},
		{func() { scope.Degraded("rejected", errors.New("bad file")) }, 503, health.LevelDegraded},
		{func() { scope.OK("loaded again") }, 200, health.LevelOK},
		{func() { scope.Stopped("done") }, 503, health.LevelStopped},
	} {
		step.report()
		code, body := getCode(t, base+"/healthz")
		var st health.Status
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatal(err)
		}
		if code != step.code || st.Level != step.level {
			t.Errorf("GET /healthz: %d, root %s; want %d, %s:\n%s", code, st.Level, step.code, step.level, body)
		}
	}
}

// While the hive starts, /healthz answers 503 with the root Unknown
// "starting", although every scope opened so far is OK; 200 once Start
// returned.
func TestHealthzWhileStarting(t *testing.T) {
	var ep *hive.HTTPEndpoint
	entered, release := make(chan struct{}), make(chan struct{})
	h := hive.NewWithOptions(hive.Options{Logger: hivetest.Logger(t, 0)},
		hive.HTTPServer,
		cell.Invoke(func(e *hive.HTTPEndpoint) { ep = e }),
		cell.Module("slow", "A module whose hook takes its time",
			cell.Invoke(func(h cell.Health, lc cell.Lifecycle) {
				h.OK("constructed")
				lc.Append(cell.Hook{OnStart: func(context.Context) error {
					close(entered)
					<-release
					return nil
				}})
			})),
	)
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	h.RegisterFlags(fs)
	if err := fs.Parse([]string{"--metrics-addr=127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() { started <- h.Start(context.Background()) }()
	<-entered
	code, body := getCode(t, "http://"+ep.Addr()+"/healthz")
	var st health.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if code != 503 || st.Level != health.LevelUnknown || st.Message != "starting" || st.Children[0].Level != health.LevelOK {
		t.Errorf("GET /healthz while starting: %d\n%s\nwant 503, the root Unknown \"starting\", the module OK", code, body)
	}
	close(release)
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	defer h.Stop(context.Background())
	if code, body := getCode(t, "http://"+ep.Addr()+"/healthz"); code != 200 {
		t.Errorf("GET /healthz once started: %d\n%s", code, body)
	}
}
