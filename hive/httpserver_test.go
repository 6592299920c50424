package hive_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/health"
	"github.com/steadystate/steadystate/hive/hivetest"
	"github.com/steadystate/steadystate/hive/job"
)

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(b)
}

func TestHTTPServerAndHealth(t *testing.T) {
	var ep *hive.HTTPEndpoint
	ready := make(chan struct{})
	hivetest.StartWithOptions(t, hivetest.Options{Flags: []string{"--metrics-addr=127.0.0.1:0"}},
		hive.HTTPServer,
		cell.Invoke(func(e *hive.HTTPEndpoint) { ep = e }),
		cell.Module("worker", "Worker", cell.Invoke(func(g job.Group) error {
			return g.Add(job.OneShot("sync", func(ctx context.Context, h cell.Health) error {
				h.OK("synced")
				close(ready)
				<-ctx.Done()
				return nil
			}))
		})),
	)
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("job did not run")
	}

	metrics := get(t, "http://"+ep.Addr()+"/metrics")
	for _, s := range []string{
		`steadystate_health_scopes{level="OK",module="worker"} 1`,
		`steadystate_health_scopes{level="Degraded",module="worker"} 0`,
		"go_goroutines",
	} {
		if !strings.Contains(metrics, s) {
			t.Errorf("/metrics lacks %q", s)
		}
	}

	var st health.Status
	if err := json.Unmarshal([]byte(get(t, "http://"+ep.Addr()+"/healthz")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Children) != 1 || st.Children[0].ID != "worker" || len(st.Children[0].Children) != 1 {
		t.Fatalf("health tree %+v, want module worker with one job", st)
	}
	if j := st.Children[0].Children[0]; j.ID != "worker.sync" || j.Level != health.LevelOK || j.Message != "synced" {
		t.Fatalf("job status %+v", j)
	}
}

// HTTPServer is off by default: without --metrics-addr nothing listens.
func TestHTTPServerOffByDefault(t *testing.T) {
	var ep *hive.HTTPEndpoint
	hivetest.Start(t, hive.HTTPServer, cell.Invoke(func(e *hive.HTTPEndpoint) { ep = e }))
	if addr := ep.Addr(); addr != "" {
		t.Fatalf("Addr = %q, want the server off", addr)
	}
}

func TestHTTPServerBadAddr(t *testing.T) {
	h := newHive(hive.HTTPServer)
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	h.RegisterFlags(fs)
	if err := fs.Parse([]string{"--metrics-addr=256.0.0.1:-1"}); err != nil {
		t.Fatal(err)
	}
	err := h.Start(t.Context())
	if err == nil || !strings.Contains(err.Error(), "module http: hook HTTP server 256.0.0.1:-1") {
		t.Fatalf("Start = %v, want an error naming the HTTP server's hook", err)
	}
}

func TestRegistryPerHive(t *testing.T) {
	// Each hive has its own registry, the same one in the graph under all
	// three types.
	for range 2 {
		var reg *prometheus.Registry
		var rr prometheus.Registerer
		var gg prometheus.Gatherer
		h := newHive(cell.Invoke(func(r *prometheus.Registry, r2 prometheus.Registerer, g prometheus.Gatherer) {
			reg, rr, gg = r, r2, g
		}))
		if err := h.Populate(); err != nil {
			t.Fatal(err)
		}
		if reg != h.Registry() || rr != prometheus.Registerer(reg) || gg != prometheus.Gatherer(reg) || reg == prometheus.DefaultRegisterer {
			t.Fatal("registry is not the hive's own")
		}
	}
}
