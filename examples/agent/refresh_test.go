package main

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steadystate/steadystate/examples/iptables"
	"github.com/steadystate/steadystate/examples/netnstest"
	"github.com/steadystate/steadystate/examples/netnsutil"
	"github.com/steadystate/steadystate/examples/routes"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
	"github.com/steadystate/steadystate/statedb"
)

// The refresh by age at scale: a pass over 50,000 routes and 10,000 rules
// is a backstop to the targets' drift reports, and must be cheap enough
// to run. BenchmarkRefreshPass measures a full pass with GOMAXPROCS=1;
// TestRefreshPassRepairsExactlyTheDrift checks that a pass repairs a
// route deleted and a rule removed by hand, and writes nothing else.

// refreshInterval is the RefreshInterval of refreshNode's reconcilers: no
// object comes of age during a test unless refreshNode.age makes it.
const refreshInterval = time.Hour

// refreshNode is a namespace with the routes and iptables targets, their
// tables in one db and n routes and m rules applied by the targets'
// reconcilers (their cells' configs). Its passes run on reconcilers
// without the targets' drift reports: the refresh by age alone.
type refreshNode struct {
	tb     testing.TB
	ns     netnsutil.NS
	db     *statedb.DB
	routes statedb.RWTable[*routes.Route]
	rules  statedb.RWTable[*iptables.Rule]
	rt     *routes.Target
	it     *iptables.Target
}

func newRefreshNode(tb testing.TB, n, m int) *refreshNode {
	tb.Helper()
	netnstest.RequireRoot(tb)
	netnstest.RequireCommand(tb, "iptables-restore")
	s := &refreshNode{tb: tb, ns: netnstest.New(tb), db: statedb.New()}
	var err error
	if s.routes, err = routes.NewTable(s.db); err != nil {
		tb.Fatal(err)
	}
	if s.rules, err = iptables.NewTable(s.db); err != nil {
		tb.Fatal(err)
	}
	if s.rt, err = routes.NewTarget(routes.TargetConfig{NetNS: string(s.ns)}); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.rt.Close() })
	if s.it, err = iptables.NewTarget(iptables.TargetConfig{NetNS: string(s.ns), Rules: s.rules}); err != nil {
		tb.Fatal(err)
	}
	wtxn := s.db.WriteTxn(s.routes, s.rules)
	for i := range n {
		r := &routes.Route{Prefix: netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.0/24", i>>8&0xff, i&0xff)), Type: "blackhole", Table: 100}
		if _, _, err := s.routes.Insert(wtxn, r.SetStatus(reconciler.StatusPending())); err != nil {
			tb.Fatal(err)
		}
	}
	for i := range m {
		r := &iptables.Rule{Table: "filter", Chain: "INPUT", Name: fmt.Sprintf("rule-%05d", i), Priority: 1,
			Spec: fmt.Sprintf("-s 10.%d.%d.0/24 -p tcp --dport %d -j ACCEPT", i>>8, i&0xff, 1000+i)}
		if _, _, err := s.rules.Insert(wtxn, r.SetStatus(reconciler.StatusPending())); err != nil {
			tb.Fatal(err)
		}
	}
	txn := wtxn.Commit()
	rr, ri := s.start(nil)
	ctx := context.Background()
	if _, err := rr.WaitUntilReconciled(ctx, s.routes.Revision(txn)); err != nil {
		tb.Fatal(err)
	}
	if _, err := ri.WaitUntilReconciled(ctx, s.rules.Revision(txn)); err != nil {
		tb.Fatal(err)
	}
	rr.Stop()
	ri.Stop()
	return s
}

// passWatch is reconciler.Metrics that tells when each table's refresh
// pass started: its first count of the objects due.
type passWatch struct {
	reconciler.NopMetrics
	mu      sync.Mutex
	started map[string]time.Time // by table
}

func newPassWatch() *passWatch { return &passWatch{started: map[string]time.Time{}} }

func (p *passWatch) RefreshQueue(_, table string, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.started[table]; !ok && n > 0 {
		p.started[table] = time.Now()
	}
}

// start starts the tables' reconcilers (the cells' configs, with a
// refresh by age, without drift reports), their refresh passes watched
// by w (if set).
func (s *refreshNode) start(w *passWatch) (*reconcilertest.Reconciler[*routes.Route], *reconcilertest.Reconciler[*iptables.Rule]) {
	s.tb.Helper()
	quiet := slog.New(slog.DiscardHandler)
	rc := routes.ReconcilerConfig(s.routes, s.rt)
	rc.Target, rc.RefreshInterval, rc.Logger = noDrift[*routes.Route]{s.rt}, refreshInterval, quiet
	ic := iptables.ReconcilerConfig(s.rules, s.it)
	ic.Target, ic.RefreshInterval, ic.Logger = noDrift[*iptables.Rule]{s.it}, refreshInterval, quiet
	if w != nil {
		rc.Metrics, ic.Metrics = w, w
	}
	return reconcilertest.Start(s.tb, s.db, rc), reconcilertest.Start(s.tb, s.db, ic)
}

// age makes every object Done a refresh interval ago, so that the next
// reconcilers' first pass refreshes them all, and returns the time they
// were made Done at.
func (s *refreshNode) age() time.Time {
	s.tb.Helper()
	then := time.Now().Add(-2 * refreshInterval)
	wtxn := s.db.WriteTxn(s.routes, s.rules)
	defer wtxn.Abort()
	for r := range s.routes.All(wtxn) {
		st := r.GetStatus()
		st.Kind, st.UpdatedAt = reconciler.StatusKindDone, then
		if _, _, err := s.routes.Insert(wtxn, r.Clone().SetStatus(st)); err != nil {
			s.tb.Fatal(err)
		}
	}
	for r := range s.rules.All(wtxn) {
		st := r.GetStatus()
		st.Kind, st.UpdatedAt = reconciler.StatusKindDone, then
		if _, _, err := s.rules.Insert(wtxn, r.Clone().SetStatus(st)); err != nil {
			s.tb.Fatal(err)
		}
	}
	wtxn.Commit()
	return then
}

// refreshed waits until every object of table is Done after then (the
// pass renewed it, or repaired it), and returns when it saw that.
func refreshed[Obj interface{ GetStatus() reconciler.Status }](tb testing.TB, db *statedb.DB, table statedb.Table[Obj], then time.Time) time.Time {
	tb.Helper()
	timeout := time.After(5 * time.Minute)
	for {
		objs, watch := table.AllWatch(db.ReadTxn())
		old := 0
		for o := range objs {
			if st := o.GetStatus(); st.Kind != reconciler.StatusKindDone || !st.UpdatedAt.After(then) {
				old++
			}
		}
		if old == 0 {
			return time.Now()
		}
		select {
		case <-watch:
		case <-timeout:
			tb.Fatalf("table %s: %d objects not refreshed within 5 minutes", table.Name(), old)
		}
	}
}

// pass runs one refresh pass over every object of both tables and returns
// how long it took, from the first table's start to the last one's end,
// and each table's.
func (s *refreshNode) pass() (time.Duration, map[string]time.Duration) {
	s.tb.Helper()
	then := s.age()
	w := newPassWatch()
	rr, ri := s.start(w)
	defer rr.Stop()
	defer ri.Stop()
	ended := map[string]time.Time{
		routes.TableName:   refreshed(s.tb, s.db, s.routes.ToTable(), then),
		iptables.TableName: refreshed(s.tb, s.db, s.rules.ToTable(), then),
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	first, last := time.Time{}, time.Time{}
	each := map[string]time.Duration{}
	for table, end := range ended {
		start, ok := w.started[table]
		if !ok {
			s.tb.Fatalf("table %s refreshed without a pass", table)
		}
		if first.IsZero() || start.Before(first) {
			first = start
		}
		last = latest(last, end)
		each[table] = end.Sub(start)
	}
	return last.Sub(first), each
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// noDrift is a target without its drift reports (reconciler.DriftTarget):
// the Target, Planner, BatchPlanner and BatchTarget of inner.
type noDrift[Obj any] struct {
	inner interface {
		reconciler.Target[Obj]
		reconciler.Planner[Obj]
		reconciler.BatchPlanner[Obj]
		reconciler.BatchTarget[Obj]
	}
}

func (t noDrift[Obj]) Update(ctx context.Context, txn statedb.ReadTxn, obj Obj) error {
	return t.inner.Update(ctx, txn, obj)
}

func (t noDrift[Obj]) Delete(ctx context.Context, txn statedb.ReadTxn, obj Obj) error {
	return t.inner.Delete(ctx, txn, obj)
}

func (t noDrift[Obj]) Prune(ctx context.Context, txn statedb.ReadTxn, desired iter.Seq2[Obj, statedb.Revision]) error {
	return t.inner.Prune(ctx, txn, desired)
}

func (t noDrift[Obj]) PlanUpdate(ctx context.Context, txn statedb.ReadTxn, obj Obj) (reconciler.Plan, error) {
	return t.inner.PlanUpdate(ctx, txn, obj)
}

func (t noDrift[Obj]) PlanDelete(ctx context.Context, txn statedb.ReadTxn, obj Obj) (reconciler.Plan, error) {
	return t.inner.PlanDelete(ctx, txn, obj)
}

func (t noDrift[Obj]) PlanPrune(ctx context.Context, txn statedb.ReadTxn, desired iter.Seq2[Obj, statedb.Revision]) (reconciler.Plan, error) {
	return t.inner.PlanPrune(ctx, txn, desired)
}

func (t noDrift[Obj]) PlanUpdateBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.PlanEntry[Obj]) {
	t.inner.PlanUpdateBatch(ctx, txn, batch)
}

func (t noDrift[Obj]) UpdateBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[Obj]) {
	t.inner.UpdateBatch(ctx, txn, batch)
}

func (t noDrift[Obj]) DeleteBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[Obj]) {
	t.inner.DeleteBatch(ctx, txn, batch)
}

// BenchmarkRefreshPass measures a full refresh pass by age over 50,000
// routes and 10,000 rules (5,000 and 1,000 with -short), both tables at
// once as in the agent, with GOMAXPROCS=1: refresh-pass-s from the first
// table's pass start to the last one's end, routes-s and rules-s each
// table's. Nothing drifted: each pass is the checks, one read of the
// kernel per round, and the statuses renewed.
func BenchmarkRefreshPass(b *testing.B) {
	for _, size := range [][2]int{{5_000, 1_000}, {50_000, 10_000}} {
		b.Run(fmt.Sprintf("routes=%d/rules=%d", size[0], size[1]), func(b *testing.B) {
			if testing.Short() && size[0] > 5_000 {
				b.Skip("-short: the large size only in a full run")
			}
			s := newRefreshNode(b, size[0], size[1])
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			var total, tr, ti time.Duration
			n := 0
			for b.Loop() {
				took, each := s.pass()
				total += took
				tr += each[routes.TableName]
				ti += each[iptables.TableName]
				n++
			}
			b.ReportMetric(total.Seconds()/float64(n), "refresh-pass-s")
			b.ReportMetric(tr.Seconds()/float64(n), "routes-s")
			b.ReportMetric(ti.Seconds()/float64(n), "rules-s")
		})
	}
}

// TestRefreshPassRepairsExactlyTheDrift deletes a route and a rule by hand
// (with no drift reports to repair them) and runs a refresh pass over
// 5,000 routes and 1,000 rules: the pass puts back exactly the route and
// the rule, and writes nothing else to the kernel.
func TestRefreshPassRepairsExactlyTheDrift(t *testing.T) {
	s := newRefreshNode(t, 5_000, 1_000)
	if out, err := s.ns.Command("ip", "route", "del", "blackhole", "10.0.7.0/24", "table", "100"); err != nil {
		t.Fatalf("ip route del: %v: %s", err, out)
	}
	chain := s.it.ChainName("INPUT")
	if out, err := s.ns.Command("iptables", "-D", chain, "10"); err != nil {
		t.Fatalf("iptables -D %s 10: %v: %s", chain, err, out)
	}
	before := netnstest.NFTRules(t, s.ns)
	w := netnstest.WatchWrites(t, s.ns)
	took, _ := s.pass()
	routeWrites, nftWrites := w.Stop()
	t.Logf("a pass over 5,000 routes and 1,000 rules: %v", took)
	if want := "route add 10.0.7.0/24 table 100 proto "; len(routeWrites) != 1 || !strings.HasPrefix(routeWrites[0], want) {
		t.Errorf("route writes of the pass: %q, want one: %q", routeWrites, want+"...")
	}
	if len(nftWrites) != 1 || trimHandle(nftWrites[0]) != "nft newrule filter/"+chain {
		t.Errorf("nf_tables writes of the pass: %q, want one new rule in %s", nftWrites, chain)
	}
	after := netnstest.NFTRules(t, s.ns)
	if len(after) != len(before)+1 {
		t.Errorf("%d nf_tables rules after the pass, want %d", len(after), len(before)+1)
	}
	// Every other rule kept its handle (and counter).
	for _, r := range before {
		if !slices.Contains(after, r) {
			t.Errorf("rule %+v was rewritten by the pass", r)
		}
	}
	out, err := s.ns.Command("ip", "route", "show", "table", "100", "10.0.7.0/24")
	if err != nil || len(out) == 0 {
		t.Errorf("route 10.0.7.0/24 not back: %v %q", err, out)
	}
}

// trimHandle is an nft line without its handle.
func trimHandle(s string) string {
	before, _, _ := strings.Cut(s, " handle ")
	return before
}
