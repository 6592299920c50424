package routes

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/steadystate/steadystate/examples/netnstest"
	"github.com/steadystate/steadystate/reconciler"
)

// The scenarios below run a real reconciler against the kernel of a fresh
// network namespace and check the result with `ip route`. Routes are
// written as `ip route` would print them; see route() and kernelRoutes().

// desiredRoutes covers both families, every type, routes via a next hop,
// via a device, via both, and tables below and above 255.
var desiredRoutes = []string{
	"blackhole 10.0.0.0/8",
	"10.1.0.0/16 dev lo",
	"10.2.0.0/16 via 192.0.2.2",
	"10.3.0.0/16 via 192.0.2.2 dev v0 table 100 metric 10",
	"unreachable 10.4.0.0/16 table 1000",
	"prohibit 10.5.0.0/16 metric 7",
	"blackhole 2001:db8:1::/48",
	"2001:db8:2::/48 via 2001:db8:ff::2",
	"prohibit 2001:db8:3::/48 table 100 metric 5",
	"2001:db8:4::/48 dev lo table 2000",
}

// desiredInKernel is desiredRoutes as `ip route` shows them.
var desiredInKernel = []string{
	"blackhole 10.0.0.0/8 table main metric 0",
	"10.1.0.0/16 dev lo table main metric 0",
	"10.2.0.0/16 via 192.0.2.2 dev v0 table main metric 0",
	"10.3.0.0/16 via 192.0.2.2 dev v0 table 100 metric 10",
	"unreachable 10.4.0.0/16 table 1000 metric 0",
	"prohibit 10.5.0.0/16 table main metric 7",
	"blackhole 2001:db8:1::/48 table main metric 1024",
	"2001:db8:2::/48 via 2001:db8:ff::2 dev v0 table main metric 1024",
	"prohibit 2001:db8:3::/48 table 100 metric 5",
	"2001:db8:4::/48 dev lo table 2000 metric 1024",
}

func routesOf(specs []string) []*Route {
	out := make([]*Route, len(specs))
	for i, s := range specs {
		out[i] = route(s)
	}
	return out
}

// applyDesired applies desiredRoutes in w and checks the kernel and the
// statuses.
func applyDesired(t *testing.T, w *world) []*Route {
	t.Helper()
	w.addVeth()
	routes := routesOf(desiredRoutes)
	if err := w.reconciled(w.insert(routes...)); err != nil {
		t.Fatalf("applying: %v", err)
	}
	for _, r := range routes {
		if st := w.status(r); st.Kind != reconciler.StatusKindDone {
			t.Errorf("%s: status %s, want Done", r, st)
		}
	}
	w.expectOurs(desiredInKernel...)
	return routes
}

func TestApply(t *testing.T) {
	w := newWorld(t)
	applyDesired(t, w)
}

func TestChange(t *testing.T) {
	w := newWorld(t)
	applyDesired(t, w)

	// Same identity, new next hop or type: the route is replaced.
	if err := w.reconciled(w.insert(
		route("10.2.0.0/16 via 192.0.2.3"),
		route("unreachable 10.0.0.0/8"),
		route("2001:db8:2::/48 via 2001:db8:ff::3"),
	)); err != nil {
		t.Fatal(err)
	}
	// New metric: a new identity. The old object goes, the new one comes,
	// in one transaction; the kernel must end with only the new route.
	wtxn := w.db.WriteTxn(w.table)
	w.table.Delete(wtxn, route("10.3.0.0/16 via 192.0.2.2 dev v0 table 100 metric 10"))
	w.table.Insert(wtxn, route("10.3.0.0/16 via 192.0.2.2 dev v0 table 100 metric 20").SetStatus(reconciler.StatusPending()))
	w.table.Delete(wtxn, route("blackhole 2001:db8:1::/48"))
	w.table.Insert(wtxn, route("blackhole 2001:db8:1::/48 metric 99").SetStatus(reconciler.StatusPending()))
	if err := w.reconciled(w.table.Revision(wtxn.Commit())); err != nil {
		t.Fatal(err)
	}
	// Table 254 is table 0: the same object, replaced.
	if err := w.reconciled(w.insert(route("10.1.0.0/16 dev v0 table 254"))); err != nil {
		t.Fatal(err)
	}
	if n := w.table.NumObjects(w.db.ReadTxn()); n != len(desiredRoutes) {
		t.Errorf("%d objects, want %d", n, len(desiredRoutes))
	}
	w.expectOurs(
		"unreachable 10.0.0.0/8 table main metric 0",
		"10.1.0.0/16 dev v0 table main metric 0",
		"10.2.0.0/16 via 192.0.2.3 dev v0 table main metric 0",
		"10.3.0.0/16 via 192.0.2.2 dev v0 table 100 metric 20",
		"unreachable 10.4.0.0/16 table 1000 metric 0",
		"prohibit 10.5.0.0/16 table main metric 7",
		"blackhole 2001:db8:1::/48 table main metric 99",
		"2001:db8:2::/48 via 2001:db8:ff::3 dev v0 table main metric 1024",
		"prohibit 2001:db8:3::/48 table 100 metric 5",
		"2001:db8:4::/48 dev lo table 2000 metric 1024",
	)
}

// makeDrift changes six of desiredRoutes in the kernel behind the
// reconciler's back: three deleted, three rewritten (keeping the target's
// protocol). driftRepairs is how each is repaired.
func makeDrift(w *world) {
	w.t.Helper()
	w.ip("route", "del", "10.0.0.0/8")
	w.ip("route", "del", "10.3.0.0/16", "table", "100", "metric", "10")
	w.ip("-6", "route", "del", "2001:db8:4::/48", "table", "2000")
	w.ip("route", "replace", "10.2.0.0/16", "via", "192.0.2.9", "proto", "254")
	w.ip("route", "replace", "prohibit", "10.4.0.0/16", "table", "1000", "proto", "254")
	w.ip("-6", "route", "replace", "blackhole", "2001:db8:2::/48", "proto", "254")
}

var driftRepairs = []string{
	"add route 10.0.0.0/8: blackhole",
	"add route 10.3.0.0/16 table 100 metric 10: via 192.0.2.2 dev v0",
	"add route 2001:db8:4::/48 table 2000: dev lo",
	"change route 10.2.0.0/16: gw 192.0.2.9 -> 192.0.2.2",
	"change route 10.4.0.0/16 table 1000: type prohibit -> unreachable",
	"change route 2001:db8:2::/48: type blackhole -> unicast",
}

// checkRepairs checks that repairs are exactly driftRepairs (in any
// order), each found as found says.
func checkRepairs(t *testing.T, repairs []reconciler.Repair, found reconciler.FoundBy) {
	t.Helper()
	var got []string
	for _, r := range repairs {
		if r.FoundBy != found || len(r.Changes) != 1 {
			t.Errorf("repair of %s found by %s with %d changes, want found by %s with 1", r.Object, r.FoundBy, len(r.Changes), found)
		}
		got = append(got, strings.TrimSuffix(r.Changes.String(), "\n"))
	}
	slices.Sort(got)
	if !slices.Equal(got, driftRepairs) {
		t.Errorf("repairs:\n  got  %q\n  want %q", got, driftRepairs)
	}
}

// TestRepairDrift changes the kernel behind the reconciler's back and
// expects the target's watch to report each change, and the reconciler to
// repair each, exactly once, counted as drift repaired with the change
// that put it back; no refresh by age, no prune.
func TestRepairDrift(t *testing.T) {
	w := newWorld(t)
	applyDesired(t, w)
	if _, total := w.repairs.Latest(); total != 0 {
		t.Fatalf("%d drifts repaired while applying", total)
	}
	makeDrift(w)
	repairs := w.repaired(len(driftRepairs))
	w.expectOurs(desiredInKernel...)
	checkRepairs(t, repairs, reconciler.FoundByEvent)
	for _, r := range routesOf(desiredRoutes) {
		if st := w.status(r); st.Kind != reconciler.StatusKindDone {
			t.Errorf("%s: status %s, want Done", r, st)
		}
	}
}

// TestRepairDriftByRefresh is TestRepairDrift without the watch: the
// refresh by age finds the drift and repairs it.
func TestRepairDriftByRefresh(t *testing.T) {
	w := newWorldWith(t, TargetConfig{DisableWatch: true}, func(cfg *reconciler.Config[*Route]) { cfg.RefreshInterval = 100 * time.Millisecond })
	applyDesired(t, w)
	makeDrift(w)
	repairs := w.repaired(len(driftRepairs))
	w.expectOurs(desiredInKernel...)
	checkRepairs(t, repairs, reconciler.FoundByRefresh)
}

// TestForeignRoutes adds routes of other protocols and expects the target
// to leave them alone: Prune does not delete them, Update does not
// overwrite one that holds a desired route's identity, Delete does not
// delete one that took over a deleted route's identity.
func TestForeignRoutes(t *testing.T) {
	w := newWorld(t)
	applyDesired(t, w)

	foreign := []string{
		"10.9.0.0/16 dev lo table main metric 0 proto static",
		"blackhole 10.8.0.0/16 table main metric 0 proto boot",
		"blackhole 10.7.0.0/16 table 100 metric 3 proto bird",
		"2001:db8:9::/48 dev lo table main metric 1024 proto static",
	}
	w.ip("route", "add", "10.9.0.0/16", "dev", "lo", "proto", "static")
	w.ip("route", "add", "blackhole", "10.8.0.0/16") // proto boot, ip's default
	w.ip("route", "add", "blackhole", "10.7.0.0/16", "table", "100", "metric", "3", "proto", "bird")
	w.ip("-6", "route", "add", "2001:db8:9::/48", "dev", "lo", "proto", "static")
	// A route of ours that is not desired: Prune removes it.
	w.ip("route", "add", "blackhole", "10.6.0.0/16", "proto", "254")

	// A foreign route that holds the identity of a desired route.
	w.ip("route", "add", "blackhole", "10.50.0.0/16", "proto", "static")
	taken := route("10.50.0.0/16 dev lo")
	err := w.reconciled(w.insert(taken))
	if !errors.Is(err, reconciler.ErrNotAllReconciled) {
		t.Fatalf("WaitUntilReconciled = %v, want ErrNotAllReconciled", err)
	}
	st := w.status(taken)
	if st.Kind != reconciler.StatusKindError || !strings.Contains(st.Error, "belongs to another protocol") {
		t.Fatalf("status of %s = %s, want an Error about the foreign route", taken, st)
	}
	t.Logf("%s: %s", taken, st)

	w.r.Prune()
	w.expectOurs(desiredInKernel...) // 10.6.0.0/16 is gone
	for _, f := range append(foreign, "blackhole 10.50.0.0/16 table main metric 0 proto static") {
		if !w.hasRoute(f) {
			t.Errorf("foreign route %q is gone; kernel has %q", f, w.kernelRoutes())
		}
	}

	// Once the foreign route is gone, the retry applies ours.
	w.ip("route", "del", "10.50.0.0/16", "proto", "static")
	w.eventually(func() string {
		if st := w.status(taken); st.Kind != reconciler.StatusKindDone {
			return "status of " + taken.String() + " is " + st.String()
		}
		return ""
	})
	if !w.hasRoute("10.50.0.0/16 dev lo table main metric 0 proto 254") {
		t.Fatalf("route %s not applied after the foreign route went: %q", taken, w.kernelRoutes())
	}

	// A foreign route takes over a desired route; deleting the desired
	// object must not delete the foreign route.
	w.ip("route", "replace", "blackhole", "10.0.0.0/8", "proto", "static")
	if err := w.reconciled(w.delete(route("blackhole 10.0.0.0/8"))); err != nil {
		t.Fatal(err)
	}
	if !w.hasRoute("blackhole 10.0.0.0/8 table main metric 0 proto static") {
		t.Fatalf("Delete removed a foreign route: %q", w.kernelRoutes())
	}
}

func TestDelete(t *testing.T) {
	w := newWorld(t)
	routes := applyDesired(t, w)
	if err := w.reconciled(w.delete(routes[:5]...)); err != nil {
		t.Fatal(err)
	}
	w.expectOurs(desiredInKernel[5:]...)
	if err := w.reconciled(w.delete(routes[5:]...)); err != nil {
		t.Fatal(err)
	}
	w.expectOurs()
}

// TestDeleteMetricZero covers the kernel reading an IPv4 delete with metric
// 0 as "any metric": deleting a metric-0 route whose kernel route is
// already gone must not delete the same prefix's route with another metric.
func TestDeleteMetricZero(t *testing.T) {
	// Without the watch: the test deletes a route by hand, which the
	// watch would repair.
	w := newWorldWith(t, TargetConfig{DisableWatch: true})
	zero, hundred := route("blackhole 10.20.0.0/16"), route("blackhole 10.20.0.0/16 metric 100")
	if err := w.reconciled(w.insert(zero, hundred)); err != nil {
		t.Fatal(err)
	}
	w.expectOurs("blackhole 10.20.0.0/16 table main metric 0", "blackhole 10.20.0.0/16 table main metric 100")
	w.ip("route", "del", "10.20.0.0/16", "metric", "0", "proto", "254")
	w.expectOurs("blackhole 10.20.0.0/16 table main metric 100")
	if err := w.reconciled(w.delete(zero)); err != nil {
		t.Fatal(err)
	}
	w.expectOurs("blackhole 10.20.0.0/16 table main metric 100")

	// And with both present, the metric-0 delete removes only metric 0.
	if err := w.reconciled(w.insert(zero)); err != nil {
		t.Fatal(err)
	}
	w.expectOurs("blackhole 10.20.0.0/16 table main metric 0", "blackhole 10.20.0.0/16 table main metric 100")
	if err := w.reconciled(w.delete(zero)); err != nil {
		t.Fatal(err)
	}
	w.expectOurs("blackhole 10.20.0.0/16 table main metric 100")
}

// TestObjectErrors checks that a route that cannot be applied yet is an
// Error on that object only, and applies once the world allows it.
func TestObjectErrors(t *testing.T) {
	w := newWorld(t)
	noDev := route("10.30.0.0/16 dev nosuch0")
	noHop := route("10.31.0.0/16 via 198.51.100.1")
	invalid := route("blackhole 10.32.1.0/16")
	good := route("blackhole 10.33.0.0/16")
	err := w.reconciled(w.insert(noDev, noHop, invalid, good))
	if !errors.Is(err, reconciler.ErrNotAllReconciled) || !strings.Contains(err.Error(), "3 objects") {
		t.Fatalf("WaitUntilReconciled = %v, want ErrNotAllReconciled for 3 objects", err)
	}
	for r, want := range map[*Route]string{
		noDev:   "device not found",
		noHop:   "network is unreachable",
		invalid: "host bits set",
	} {
		st := w.status(r)
		if st.Kind != reconciler.StatusKindError || !strings.Contains(st.Error, want) {
			t.Errorf("status of %s = %s, want an Error with %q", r, st, want)
		}
		t.Logf("%s: %s", r, st)
	}
	if st := w.status(good); st.Kind != reconciler.StatusKindDone {
		t.Errorf("status of %s = %s, want Done", good, st)
	}
	w.expectOurs("blackhole 10.33.0.0/16 table main metric 0")

	// The device and the next hop's network appear: the retries succeed.
	w.ip("link", "add", "nosuch0", "type", "veth", "peer", "name", "nosuch1")
	w.ip("addr", "add", "198.51.100.2/24", "dev", "nosuch0")
	w.ip("link", "set", "nosuch0", "up")
	w.ip("link", "set", "nosuch1", "up")
	w.eventually(func() string {
		for _, r := range []*Route{noDev, noHop} {
			if st := w.status(r); st.Kind != reconciler.StatusKindDone {
				return "status of " + r.String() + " is " + st.String()
			}
		}
		return ""
	})
	w.expectOurs(
		"10.30.0.0/16 dev nosuch0 table main metric 0",
		"10.31.0.0/16 via 198.51.100.1 dev nosuch0 table main metric 0",
		"blackhole 10.33.0.0/16 table main metric 0",
	)
}

// TestTargetDirect exercises the target without a reconciler: validation
// is terminal, idempotence, two protocols in one namespace, Close.
func TestTargetDirect(t *testing.T) {
	ns := netnstest.New(t)
	ctx := context.Background()
	a, err := NewTarget(TargetConfig{NetNS: string(ns)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := NewTarget(TargetConfig{NetNS: string(ns), Protocol: 200})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.Protocol() != DefaultProtocol || b.Protocol() != 200 {
		t.Fatalf("protocols %d, %d", a.Protocol(), b.Protocol())
	}

	err = a.Update(ctx, nil, route("10.1.2.0/8 dev lo"))
	if !errors.Is(err, ErrInvalidRoute) || !reconciler.IsTerminal(err) {
		t.Fatalf("Update of an invalid route = %v, want a terminal ErrInvalidRoute", err)
	}

	ra, rb := route("blackhole 10.1.0.0/16"), route("blackhole 10.2.0.0/16")
	for range 2 { // idempotent
		if err := a.Update(ctx, nil, ra); err != nil {
			t.Fatal(err)
		}
		if err := b.Update(ctx, nil, rb); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Update(ctx, nil, ra); !errors.Is(err, ErrForeignRoute) {
		t.Fatalf("b.Update of a's route = %v, want ErrForeignRoute", err)
	}
	if err := b.Delete(ctx, nil, ra); err != nil {
		t.Fatal(err)
	}
	// Each prunes everything of its own; neither touches the other's.
	if err := b.Prune(ctx, nil, func(func(*Route, uint64) bool) {}); err != nil {
		t.Fatal(err)
	}
	out, err := ns.Command("ip", "route", "show", "10.1.0.0/16", "proto", "254")
	if err != nil || !strings.Contains(string(out), "blackhole 10.1.0.0/16") {
		t.Fatalf("a's route is gone after b's Delete and Prune: %s %v", out, err)
	}
	if err := a.Delete(ctx, nil, ra); err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(ctx, nil, ra); err != nil { // idempotent
		t.Fatal(err)
	}
	out, err = ns.Command("ip", "route", "show", "table", "all", "proto", "254")
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("routes of protocol 254 left: %q %v", out, err)
	}
	out, err = ns.Command("ip", "route", "show", "table", "all", "proto", "200")
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("b's Prune left routes of protocol 200: %q %v", out, err)
	}

	a.Close()
	a.Close()
	if err := a.Update(ctx, nil, ra); !errors.Is(err, ErrTargetClosed) {
		t.Fatalf("Update after Close = %v, want ErrTargetClosed", err)
	}
	if err := a.Prune(ctx, nil, func(func(*Route, uint64) bool) {}); !errors.Is(err, ErrTargetClosed) {
		t.Fatalf("Prune after Close = %v, want ErrTargetClosed", err)
	}
}

func TestNewTargetConfig(t *testing.T) {
	for _, p := range []int{-1, 1, 2, 3, 4, 256} {
		if _, err := NewTarget(TargetConfig{Protocol: p}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewTarget(Protocol: %d) = %v, want ErrInvalidConfig", p, err)
		}
	}
	if _, err := NewTarget(TargetConfig{NetNS: ".."}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NewTarget(NetNS: ..) = %v, want ErrInvalidConfig", err)
	}
	// The namespace is entered at the first operation: a missing one is
	// that operation's error, naming it, and not a closed target's.
	tg, err := NewTarget(TargetConfig{NetNS: "/nonexistent/netns"})
	if err != nil {
		t.Fatalf("NewTarget with a namespace that does not exist yet: %v", err)
	}
	defer tg.Close()
	err = tg.Update(context.Background(), nil, route("blackhole 10.0.0.0/8"))
	if err == nil || errors.Is(err, ErrTargetClosed) || !strings.Contains(err.Error(), "/nonexistent/netns") {
		t.Errorf("Update in a missing namespace = %v, want an error naming it", err)
	}
}

// TestBatches runs batches larger than a pipeline chunk, with failures
// spread among successes, and checks that each outcome lands on its own
// entry.
func TestBatches(t *testing.T) {
	ns := netnstest.New(t)
	ctx := context.Background()
	target, err := NewTarget(TargetConfig{NetNS: string(ns)})
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()

	const n = 3*chunkSize + 17
	batch := make([]reconciler.BatchEntry[*Route], n)
	for i, p := range benchPrefixes(n) {
		batch[i].Object = &Route{Prefix: p, Type: TypeBlackhole}
		if i%97 == 5 { // a next hop on no connected network
			batch[i].Object = &Route{Prefix: p, Via: netip.MustParseAddr("198.51.100.1")}
		}
	}
	check := func(what string) {
		t.Helper()
		for i, e := range batch {
			if failing := i%97 == 5; failing != (e.Result != nil) {
				t.Fatalf("%s: entry %d (%s): result %v", what, i, e.Object, e.Result)
			}
		}
	}
	target.UpdateBatch(ctx, nil, batch)
	check("first update")
	target.UpdateBatch(ctx, nil, batch) // every identity taken, by us, as desired
	check("second update")
	out, err := ns.Command("ip", "route", "show", "proto", "254")
	if err != nil {
		t.Fatal(err)
	}
	want := n - (n-5+96)/97
	if got := strings.Count(string(out), "\n"); got != want {
		t.Fatalf("%d routes in the kernel, want %d", got, want)
	}
	target.DeleteBatch(ctx, nil, batch)
	for i, e := range batch {
		if e.Result != nil {
			t.Fatalf("delete: entry %d: %v", i, e.Result)
		}
	}
	if out, _ := ns.Command("ip", "route", "show", "proto", "254"); len(out) != 0 {
		t.Fatalf("routes left after DeleteBatch:\n%s", out)
	}
}
