package routes

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steadystate/steadystate/examples/netnstest"
	"github.com/steadystate/steadystate/examples/netnsutil"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
	"github.com/steadystate/steadystate/statedb"
)

// This file holds the scenario tests' world: a fresh namespace, a routes
// table, a target and a running reconciler, plus readers of the kernel's
// routes through `ip -j route`.

// waitTimeout bounds every wait; generous for a loaded machine under -race.
const waitTimeout = 20 * time.Second

// world is one scenario's namespace, table, target and running reconciler.
type world struct {
	t       *testing.T
	ns      netnsutil.NS
	db      *statedb.DB
	table   statedb.RWTable[*Route]
	target  *Target
	r       reconciler.Reconciler[*Route]
	repairs *reconciler.RepairLog // every drift the reconciler repaired
	health  *reconcilertest.Health
	metrics *driftMetrics

	mu      sync.Mutex
	markers map[RouteKey]bool // marker routes whose notification the watch handled
	nmarker int
}

// markerTable is the routing table of sync's marker routes.
const markerTable = 9

// seen notes the marker routes among the routes whose notification the
// target's watch handled (Target.routeSeen).
func (w *world) seen(k RouteKey) {
	if k.Table != markerTable {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.markers[k] = true
}

// sync adds a marker route (another program's, in table 9) and waits until
// the target's watch has handled its notification: the notifications come
// in order, so every change made before sync has been reported by then.
func (w *world) sync() {
	w.t.Helper()
	w.mu.Lock()
	w.nmarker++
	p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 255, byte(w.nmarker >> 8), byte(w.nmarker)}), 32)
	w.mu.Unlock()
	w.ip("route", "add", "blackhole", p.String(), "table", strconv.Itoa(markerTable), "proto", "static")
	k := NewRouteKey(markerTable, p, 0)
	w.eventually(func() string {
		w.mu.Lock()
		defer w.mu.Unlock()
		if !w.markers[k] {
			return "the watch has not handled marker route " + p.String()
		}
		return ""
	})
}

// newWorld creates a namespace and starts a reconciler of a routes table in
// it, with fast retries and the changes of edit applied to its config.
// Everything is stopped and removed when t ends.
func newWorld(t *testing.T, edit ...func(*reconciler.Config[*Route])) *world {
	t.Helper()
	return newWorldWith(t, TargetConfig{}, edit...)
}

// newWorldWith is newWorld with a target made from tc (its NetNS is the
// world's namespace).
func newWorldWith(t *testing.T, tc TargetConfig, edit ...func(*reconciler.Config[*Route])) *world {
	t.Helper()
	ns := netnstest.New(t)
	db := statedb.New()
	table, err := NewTable(db)
	if err != nil {
		t.Fatal(err)
	}
	tc.NetNS = string(ns)
	target, err := NewTarget(tc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { target.Close() }) // after the reconciler has stopped
	w := &world{t: t, ns: ns, db: db, table: table, target: target,
		repairs: &reconciler.RepairLog{Size: 100_000}, health: &reconcilertest.Health{}, metrics: &driftMetrics{},
		markers: map[RouteKey]bool{}}
	target.routeSeen = w.seen
	cfg := ReconcilerConfig(table, target)
	cfg.RetryBackoffMin = 10 * time.Millisecond
	cfg.RetryBackoffMax = 50 * time.Millisecond
	cfg.OnRepair = w.repairs.Add
	cfg.Health = w.health
	cfg.Metrics = w.metrics
	for _, e := range edit {
		e(&cfg)
	}
	w.r = reconcilertest.Start(t, db, cfg)
	return w
}

// driftMetrics counts the reconciler's drift checks.
type driftMetrics struct {
	reconciler.NopMetrics
	mu                       sync.Mutex
	reports, checked, rounds int
}

func (m *driftMetrics) DriftChecked(_, _ string, reports, checked int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reports += reports
	m.checked += checked
	if checked > 0 {
		m.rounds++
	}
}

func (m *driftMetrics) read() (reports, checked, rounds int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reports, m.checked, m.rounds
}

// repaired waits until the reconciler has repaired n drifts in all since
// the world started, and returns the repairs, oldest first.
func (w *world) repaired(n int) []reconciler.Repair {
	w.t.Helper()
	var got []reconciler.Repair
	w.eventually(func() string {
		latest, total := w.repairs.Latest()
		if total < n {
			return fmt.Sprintf("%d drifts repaired, want %d", total, n)
		}
		got = latest
		return ""
	})
	slices.Reverse(got)
	return got
}

// ip runs ip in the namespace and fails the test if it fails.
func (w *world) ip(args ...string) string {
	w.t.Helper()
	out, err := w.ns.Command("ip", args...)
	if err != nil {
		w.t.Fatal(err)
	}
	return string(out)
}

// insert inserts clones of routes with status Pending in one transaction
// and returns its revision.
func (w *world) insert(routes ...*Route) statedb.Revision {
	w.t.Helper()
	wtxn := w.db.WriteTxn(w.table)
	defer wtxn.Abort()
	for _, r := range routes {
		if _, _, err := w.table.Insert(wtxn, r.Clone().SetStatus(reconciler.StatusPending())); err != nil {
			w.t.Fatal(err)
		}
	}
	return w.table.Revision(wtxn.Commit())
}

// delete deletes the objects with the keys of routes in one transaction
// and returns its revision.
func (w *world) delete(routes ...*Route) statedb.Revision {
	w.t.Helper()
	wtxn := w.db.WriteTxn(w.table)
	defer wtxn.Abort()
	for _, r := range routes {
		if _, _, err := w.table.Delete(wtxn, r); err != nil {
			w.t.Fatal(err)
		}
	}
	return w.table.Revision(wtxn.Commit())
}

// reconciled waits until every change up to rev was attempted and returns
// WaitUntilReconciled's error (nil when nothing failed).
func (w *world) reconciled(rev statedb.Revision) error {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	_, err := w.r.WaitUntilReconciled(ctx, rev)
	if ctx.Err() != nil {
		w.t.Fatalf("reconciler did not reach revision %d: %v", rev, err)
	}
	return err
}

// status returns the stored status of the object with r's key.
func (w *world) status(r *Route) reconciler.Status {
	w.t.Helper()
	obj, _, ok := w.table.Get(w.db.ReadTxn(), PrimaryIndex.Query(r.Key()))
	if !ok {
		w.t.Fatalf("no object %s in the table", r)
	}
	return obj.Status
}

// eventually polls cond until it returns "" (success) or the timeout, and
// then fails with cond's last complaint.
func (w *world) eventually(cond func() string) {
	w.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("timed out after %v: %s", waitTimeout, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ipRoute is a route as `ip -j route show` prints it.
type ipRoute struct {
	Type     string `json:"type"`
	Dst      string `json:"dst"`
	Gateway  string `json:"gateway"`
	Dev      string `json:"dev"`
	Table    string `json:"table"`
	Protocol string `json:"protocol"`
	Metric   *int   `json:"metric"`
}

// kernelRoutes returns the namespace's routes of both families in all
// tables except local, as read by `ip -j route show table all`, each in
// the form "[TYPE ]PREFIX[ via GW][ dev DEV] table T metric M proto P",
// sorted. Kernel routes (connected prefixes, IPv6 multicast) are left out.
func (w *world) kernelRoutes() []string {
	w.t.Helper()
	var lines []string
	for _, family := range []string{"-4", "-6"} {
		var routes []ipRoute
		if err := json.Unmarshal([]byte(w.ip("-j", family, "route", "show", "table", "all")), &routes); err != nil {
			w.t.Fatal(err)
		}
		for _, r := range routes {
			if r.Table == "local" || r.Protocol == "kernel" {
				continue
			}
			lines = append(lines, r.String(family == "-6"))
		}
	}
	slices.Sort(lines)
	return lines
}

// String writes r in the form kernelRoutes uses.
func (r ipRoute) String(v6 bool) string {
	var b strings.Builder
	if r.Type != "" && r.Type != "unicast" {
		b.WriteString(r.Type + " ")
	}
	dst := r.Dst
	switch {
	case dst == "default" && v6:
		dst = "::/0"
	case dst == "default":
		dst = "0.0.0.0/0"
	case !strings.Contains(dst, "/") && v6:
		dst += "/128"
	case !strings.Contains(dst, "/"):
		dst += "/32"
	}
	b.WriteString(dst)
	if r.Gateway != "" {
		b.WriteString(" via " + r.Gateway)
	}
	if r.Dev != "" && (r.Type == "" || r.Type == "unicast") {
		b.WriteString(" dev " + r.Dev)
	}
	table := cmpOr(r.Table, "main")
	metric := 0
	if r.Metric != nil {
		metric = *r.Metric
	}
	fmt.Fprintf(&b, " table %s metric %d proto %s", table, metric, cmpOr(r.Protocol, "boot"))
	return b.String()
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ours returns the kernel routes of the target's protocol.
func (w *world) ours() []string {
	w.t.Helper()
	var out []string
	suffix := " proto " + strconv.Itoa(w.target.Protocol())
	for _, l := range w.kernelRoutes() {
		if strings.HasSuffix(l, suffix) {
			out = append(out, l)
		}
	}
	return out
}

// expectOurs waits until the target's routes in the kernel are exactly
// want (in kernelRoutes' form, without the " proto N" suffix).
func (w *world) expectOurs(want ...string) {
	w.t.Helper()
	want = slices.Sorted(slices.Values(want)) // a copy: want may be a caller's slice
	suffix := " proto " + strconv.Itoa(w.target.Protocol())
	w.eventually(func() string {
		got := w.ours()
		for i := range got {
			got[i] = strings.TrimSuffix(got[i], suffix)
		}
		if slices.Equal(got, want) {
			return ""
		}
		return fmt.Sprintf("routes of protocol %d:\n  got  %q\n  want %q", w.target.Protocol(), got, want)
	})
}

// hasRoute reports whether the kernel lists route line (kernelRoutes' form).
func (w *world) hasRoute(line string) bool {
	w.t.Helper()
	return slices.Contains(w.kernelRoutes(), line)
}

// addVeth creates a veth pair in the namespace with 192.0.2.1/24 and
// 2001:db8:ff::1/64 on v0, both ends up: next hops 192.0.2.2 and
// 2001:db8:ff::2 are then reachable through v0.
func (w *world) addVeth() {
	w.t.Helper()
	w.ip("link", "add", "v0", "type", "veth", "peer", "name", "v1")
	w.ip("addr", "add", "192.0.2.1/24", "dev", "v0")
	w.ip("-6", "addr", "add", "2001:db8:ff::1/64", "dev", "v0", "nodad")
	w.ip("link", "set", "v0", "up")
	w.ip("link", "set", "v1", "up")
}

// route builds a Route from ip-route-like words, for readable scenarios:
// route("blackhole 10.0.0.0/8 table 100 metric 5"), route("10.1.0.0/16 via
// 192.0.2.2 dev v0").
func route(spec string) *Route {
	f := strings.Fields(spec)
	r := &Route{}
	switch f[0] {
	case TypeBlackhole, TypeUnreachable, TypeProhibit:
		r.Type, f = f[0], f[1:]
	}
	r.Prefix, f = netip.MustParsePrefix(f[0]), f[1:]
	for ; len(f) >= 2; f = f[2:] {
		switch f[0] {
		case "via":
			r.Via = netip.MustParseAddr(f[1])
		case "dev":
			r.Dev = f[1]
		case "table":
			r.Table, _ = strconv.Atoi(f[1])
		case "metric":
			r.Metric, _ = strconv.Atoi(f[1])
		default:
			panic("route: unknown word " + f[0])
		}
	}
	if len(f) != 0 {
		panic("route: odd words in " + spec)
	}
	return r
}
