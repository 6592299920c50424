package etcd_test

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/steadystate/steadystate/etcd"
	"github.com/steadystate/steadystate/etcd/etcdtest"
)

// TestFleetCostPerNode checks what a node costs etcd, at 4 and at 16
// nodes (each with its own client, as fleet mode makes them): one watch
// stream and one watcher per node, and at most one transaction per node
// and fleet-wide change (its status write), besides the apply's own, a
// relist's and a record's rewrite. What a node costs etcd must not grow
// with the fleet.
func TestFleetCostPerNode(t *testing.T) {
	cl := etcdtest.StartCluster(t, etcdtest.Binary(t), 1)
	c := cl.Client()
	l := etcd.Layout{Prefix: "/cost"}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var agents []*simAgent
	defer func() {
		cancel()
		wg.Wait()
		for _, a := range agents {
			a.pub.Stop(context.Background())
			a.client.Close()
		}
	}()
	desired := map[string][]byte{}
	for i := range 50 {
		desired["o"+strconv.Itoa(i)] = []byte("v0")
	}
	version := 0
	apply := func() int64 {
		version++
		desired["o"+strconv.Itoa(version%50)] = []byte("v" + strconv.Itoa(version))
		rev, err := etcd.Apply(ctx, c, l, "objs", etcd.ScopeAll, desired)
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	rev := apply()
	fleet := watchFleet(ctx, c, l)

	// The transactions of an apply alone, with no node.
	const changes = 5
	before := scrapeEtcd(t, cl)
	for range changes {
		rev = apply()
	}
	perApply := (scrapeEtcd(t, cl).txns - before.txns) / changes
	if perApply < 1 {
		t.Fatalf("an apply made %v transactions", perApply)
	}

	// Transactions a node makes besides its status writes: a relist's
	// read, the record rewritten after SeenInterval (a slow run).
	others := func() (n int) {
		for _, a := range agents {
			n += a.relists() + a.pub.Records()
		}
		return n
	}
	for _, n := range []int{4, 16} {
		for len(agents) < n {
			a, err := newOwnClientAgent(ctx, cl, l, "node"+strconv.Itoa(len(agents)), &wg)
			if err != nil {
				t.Fatal(err)
			}
			agents = append(agents, a)
		}
		fleet.waitApplied(t, rev, n)
		synced := scrapeEtcd(t, cl)
		if streams := synced.streams - before.streams; streams != float64(n) {
			t.Errorf("%d nodes: %v watch streams, want one per node", n, streams)
		}
		if watchers := synced.watchers - before.watchers; watchers != float64(n) {
			t.Errorf("%d nodes: %v watchers, want one per node", n, watchers)
		}
		othersBefore := others()
		for range changes {
			rev = apply()
			fleet.waitApplied(t, rev, n)
		}
		txns := scrapeEtcd(t, cl).txns - synced.txns - changes*perApply - float64(others()-othersBefore)
		perNode := txns / changes / float64(n)
		if perNode > 1 {
			t.Errorf("%d nodes: %.2f transactions per node and change (besides the applies', relists' and records'), want at most 1", n, perNode)
		}
		t.Logf("%d nodes: %.0f watch streams, %.0f watchers, %.2f transactions per node and change (an apply makes %.0f)",
			n, synced.streams-before.streams, synced.watchers-before.watchers, perNode, perApply)
	}
}

// newOwnClientAgent starts an agent with a client of its own, as fleet
// mode makes it (etcd.ClientOptions), reporting as fleet mode's reporter.
func newOwnClientAgent(ctx context.Context, cl *etcdtest.Cluster, l etcd.Layout, name string, wg *sync.WaitGroup) (*simAgent, error) {
	c, err := etcd.ClientOptions{Endpoints: cl.Endpoints()}.Client()
	if err != nil {
		return nil, err
	}
	a, err := newSimAgent(ctx, c, l, name)
	if err != nil {
		c.Close()
		return nil, err
	}
	a.client = c
	wg.Add(3)
	go func() { defer wg.Done(); a.refl.Run(ctx) }()
	go func() { defer wg.Done(); a.rec.Run(ctx) }()
	go func() { defer wg.Done(); a.reportOnChange(ctx) }()
	return a, nil
}

// etcdFigures are counts read from the members' metrics, summed.
type etcdFigures struct {
	watchers, streams float64 // etcd_debugging_mvcc_watcher_total, _watch_stream_total
	unary             float64 // grpc_server_handled_total{grpc_type="unary"}
	txns              float64 // grpc_server_handled_total{grpc_method="Txn"}
}

// scrapeEtcd reads every member's /metrics (no connection kept).
func scrapeEtcd(t testing.TB, cl *etcdtest.Cluster) etcdFigures {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	var fig etcdFigures
	for _, m := range cl.Members {
		resp, err := client.Get(m.ClientURL + "/metrics")
		if err != nil {
			t.Fatalf("metrics of etcd member %s: %v", m.Name, err)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("metrics of etcd member %s: %v", m.Name, err)
		}
		for _, need := range []string{"etcd_debugging_mvcc_watcher_total", "etcd_debugging_mvcc_watch_stream_total", "grpc_server_handled_total"} {
			if families[need] == nil {
				t.Fatalf("etcd member %s: no metric %s", m.Name, need)
			}
		}
		fig.watchers += sumMetric(families["etcd_debugging_mvcc_watcher_total"], "", "")
		fig.streams += sumMetric(families["etcd_debugging_mvcc_watch_stream_total"], "", "")
		fig.unary += sumMetric(families["grpc_server_handled_total"], "grpc_type", "unary")
		fig.txns += sumMetric(families["grpc_server_handled_total"], "grpc_method", "Txn")
	}
	return fig
}

// sumMetric sums the family's gauges or counters whose label has value
// (any, if label is "").
func sumMetric(mf *dto.MetricFamily, label, value string) float64 {
	total := 0.0
	for _, m := range mf.Metric {
		if label != "" && !slices.ContainsFunc(m.Label, func(l *dto.LabelPair) bool { return l.GetName() == label && l.GetValue() == value }) {
			continue
		}
		switch {
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Counter != nil:
			total += m.Counter.GetValue()
		}
	}
	return total
}
