package routes

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/steadystate/steadystate/examples/netnsutil"
	"github.com/steadystate/steadystate/internal/memtest"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
)

// The scenarios of the target's drift watch (watch.go), against the kernel
// of a fresh namespace. Retries are an hour apart unless said otherwise,
// so that whatever happens within a test happened because of a
// notification, not a retry's timer.

// slowRetries makes failed objects wait an hour for their retry.
func slowRetries(cfg *reconciler.Config[*Route]) {
	cfg.RetryBackoffMin, cfg.RetryBackoffMax = time.Hour, time.Hour
}

// waitStatus waits until r's status is kind with an error containing
// text, and returns how long it took.
func (w *world) waitStatus(r *Route, kind reconciler.StatusKind, text string) time.Duration {
	w.t.Helper()
	start := time.Now()
	w.eventually(func() string {
		if st := w.status(r); st.Kind != kind || !strings.Contains(st.Error, text) {
			return fmt.Sprintf("status of %s is %s, want %s %q", r, st, kind, text)
		}
		return ""
	})
	return time.Since(start)
}

// A foreign route that takes a desired route's identity is reported as
// that object's Error (and never overwritten); once it goes, the desired
// route is applied again, without waiting for a retry's backoff.
func TestForeignRouteReported(t *testing.T) {
	w := newWorld(t, slowRetries)
	applyDesired(t, w)
	taken := route("blackhole 10.0.0.0/8")
	start := time.Now()
	w.ip("route", "replace", "blackhole", "10.0.0.0/8", "proto", "static")
	w.waitStatus(taken, reconciler.StatusKindError, "belongs to another protocol")
	t.Logf("foreign route reported as the object's Error after %v", time.Since(start))
	if !w.hasRoute("blackhole 10.0.0.0/8 table main metric 0 proto static") {
		t.Fatalf("the foreign route was overwritten: %q", w.kernelRoutes())
	}
	w.ip("route", "del", "10.0.0.0/8", "proto", "static")
	w.waitStatus(taken, reconciler.StatusKindDone, "")
	w.expectOurs(desiredInKernel...)
}

// A route whose device is missing fails, and is retried as soon as the
// device appears (here down: the kernel says the network is down) and
// again as soon as it comes up. When its device goes down, the kernel
// drops the route without a notification of its own: the link's
// notification has it checked, and it fails until the link is up again.
func TestRouteFollowsItsLink(t *testing.T) {
	w := newWorld(t, slowRetries)
	r := route("10.40.0.0/16 dev d0")
	if err := w.reconciled(w.insert(r)); err == nil {
		t.Fatal("a route on a missing device was applied")
	}
	w.waitStatus(r, reconciler.StatusKindError, "device not found")

	w.ip("link", "add", "d0", "type", "veth", "peer", "name", "d1")
	w.waitStatus(r, reconciler.StatusKindError, "network is down")
	w.ip("link", "set", "d0", "up")
	t.Logf("applied %v after the link came up", w.waitStatus(r, reconciler.StatusKindDone, ""))
	w.expectOurs("10.40.0.0/16 dev d0 table main metric 0")

	w.ip("link", "set", "d0", "down")
	w.waitStatus(r, reconciler.StatusKindError, "network is down")
	w.expectOurs()
	w.ip("link", "set", "d0", "up")
	w.waitStatus(r, reconciler.StatusKindDone, "")
	w.expectOurs("10.40.0.0/16 dev d0 table main metric 0")
}

// When notifications are lost (the socket's buffer overflows under a
// flood), the watch subscribes again and has every object checked: all
// the routes deleted are put back.
func TestWatchOverflow(t *testing.T) {
	const n = 2000
	w := newWorld(t, slowRetries, func(cfg *reconciler.Config[*Route]) {
		cfg.Target.(*Target).eventBuffer = 1 // the kernel makes it its minimum: a few messages
	})
	applyRoutes(t, w, n)
	overflows := w.target.WatchStats().Overflows
	deleteAllByHand(t, w, n)
	w.eventually(func() string {
		if got := len(w.ours()); got != n {
			return fmt.Sprintf("%d of %d routes back", got, n)
		}
		return ""
	})
	stats := w.target.WatchStats()
	t.Logf("watch: %+v", stats)
	if stats.Overflows == overflows {
		t.Fatal("no overflow with a tiny buffer under a flood: the test tests nothing")
	}
}

// A flood of notifications (a script deleting every route) is coalesced:
// the routes are repaired in a few rounds, each object checked about once,
// never one check per notification.
func TestDriftFloodCoalesced(t *testing.T) {
	const n = 2000
	w := newWorld(t, slowRetries)
	applyRoutes(t, w, n)
	w.sync() // the notifications of the apply's own routes are handled
	reports0, checked0, rounds0 := w.metrics.read()
	_, repaired0 := w.repairs.Latest()
	deleteAllByHand(t, w, n)
	w.eventually(func() string {
		if _, total := w.repairs.Latest(); total-repaired0 < n {
			return fmt.Sprintf("%d of %d routes repaired", total-repaired0, n)
		}
		return ""
	})
	w.expectOurs(ourN(n)...)
	reports, checked, rounds := w.metrics.read()
	reports, checked, rounds = reports-reports0, checked-checked0, rounds-rounds0
	_, repaired := w.repairs.Latest()
	t.Logf("%d routes deleted: %d reports, %d checks in %d rounds, %d repaired; watch %+v",
		n, reports, checked, rounds, repaired-repaired0, w.target.WatchStats())
	if repaired-repaired0 != n {
		t.Errorf("%d repairs for %d routes deleted once each", repaired-repaired0, n)
	}
	if checked > 3*n {
		t.Errorf("%d checks for %d routes: not coalesced", checked, n)
	}
	if rounds > n/10 {
		t.Errorf("%d rounds of checks for %d routes: not coalesced into rounds", rounds, n)
	}
}

// Notifications about routes that are not desired (another program's)
// change nothing and cost nothing beyond their decoding: no check, no
// operation.
func TestForeignEventsCostNothing(t *testing.T) {
	const n = 500
	w := newWorld(t)
	// Routes that no link change concerns (the link notifications come on
	// a socket of their own, in no order with the routes').
	applyRoutes(t, w, 100)
	// The notifications of the apply's own routes are handled (and known
	// as the target's own: not reported), and so is the watch's first
	// ChangedAll, which it made before it read any.
	w.sync()
	w.eventually(func() string {
		if reports, _, _ := w.metrics.read(); reports < 1 {
			return "the watch's first report not counted"
		}
		return ""
	})
	reports0, checked0, _ := w.metrics.read()
	var sb strings.Builder
	for _, p := range benchPrefixes(n) {
		fmt.Fprintf(&sb, "route add blackhole %s table 7 proto static\n", p)
	}
	for _, p := range benchPrefixes(n)[:100] { // the desired ones' prefixes, in another table
		fmt.Fprintf(&sb, "route add blackhole %s table 8 proto %d\n", p, DefaultProtocol)
	}
	batchFile(t, w, sb.String())
	w.sync()
	// Each notification was decoded and dropped at the cost of a lookup:
	// nothing was counted, nothing checked.
	if reports, checked, _ := w.metrics.read(); reports != reports0 || checked != checked0 {
		t.Errorf("%d reports and %d checks for %d notifications about foreign routes, want none", reports-reports0, checked-checked0, n)
	}
	if _, total := w.repairs.Latest(); total != 0 {
		t.Errorf("%d repairs", total)
	}
}

// When the namespace goes away, the watch says so (health Degraded, naming
// the namespace) and the target's sockets close; once a namespace of that
// name is back, the watch works again and the routes are applied there.
func TestNamespaceGone(t *testing.T) {
	w := newWorld(t)
	applyDesired(t, w)
	name := filepath.Base(string(w.ns))
	if out, err := netnsutil.NS("").Command("ip", "netns", "del", name); err != nil {
		t.Fatalf("ip netns del: %v %s", err, out)
	}
	// The health names the namespace: gone, or (once the watch is
	// restarted, which may come before the report) not found.
	gone := w.health.WaitFor(t, reconcilertest.LevelDegraded, "watching the real system for drift: routes target: network namespace "+string(w.ns))
	t.Logf("health: %s", gone)
	// The routes are not applied any more, and their statuses say so.
	for _, r := range routesOf(desiredRoutes) {
		w.waitStatus(r, reconciler.StatusKindError, "network namespace "+string(w.ns))
	}

	ns, _, err := netnsutil.NewNamed(name) // the test's cleanup deletes it
	if err != nil {
		t.Fatal(err)
	}
	if ns != w.ns {
		t.Fatalf("recreated %s, want %s", ns, w.ns)
	}
	w.addVeth()
	w.health.WaitFor(t, reconcilertest.LevelOK, "")
	w.expectOurs(desiredInKernel...)
}

// applyRoutes applies n blackhole routes (benchPrefixes) and waits until
// all are Done.
func applyRoutes(t *testing.T, w *world, n int) {
	t.Helper()
	var rs []*Route
	for _, p := range benchPrefixes(n) {
		rs = append(rs, &Route{Prefix: p, Type: TypeBlackhole})
	}
	if err := w.reconciled(w.insert(rs...)); err != nil {
		t.Fatal(err)
	}
	w.expectOurs(ourN(n)...)
}

// ourN is how kernelRoutes shows applyRoutes' routes.
func ourN(n int) []string {
	var out []string
	for _, p := range benchPrefixes(n) {
		out = append(out, "blackhole "+p.String()+" table main metric 0")
	}
	return out
}

// deleteAllByHand deletes applyRoutes' n routes with one `ip -batch`.
func deleteAllByHand(t *testing.T, w *world, n int) {
	t.Helper()
	var sb strings.Builder
	for _, p := range benchPrefixes(n) {
		fmt.Fprintf(&sb, "route del %s proto %d\n", p, DefaultProtocol)
	}
	batchFile(t, w, sb.String())
}

// batchFile runs `ip -batch` with lines in the world's namespace.
func batchFile(t *testing.T, w *world, lines string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "batch")
	if err := os.WriteFile(file, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	w.ip("-batch", file)
}

// The target's own writes never reach the watch (notify.go): adding 100
// routes and deleting half of them costs it no notification at all, and
// a route deleted by hand afterwards is still repaired.
func TestWatchFiltersOwn(t *testing.T) {
	w := newWorld(t, slowRetries)
	// The first write opens the pipeline, whose port is filtered from
	// then on; the watch's first report says that it reads (its socket
	// filtered), and the marker that it read what came before.
	if err := w.reconciled(w.insert(route("blackhole 10.200.0.0/24"))); err != nil {
		t.Fatal(err)
	}
	w.eventually(func() string {
		if reports, _, _ := w.metrics.read(); reports < 1 {
			return "the watch's first report not counted"
		}
		return ""
	})
	w.sync()
	before := w.target.WatchStats()
	var rs []*Route
	for i := range 100 {
		rs = append(rs, route(fmt.Sprintf("blackhole 10.201.%d.0/24", i)))
	}
	if err := w.reconciled(w.insert(rs...)); err != nil {
		t.Fatal(err)
	}
	if err := w.reconciled(w.delete(rs[:50]...)); err != nil {
		t.Fatal(err)
	}
	w.sync()
	after := w.target.WatchStats()
	if after.RouteEvents != before.RouteEvents+1 || after.Own != before.Own {
		t.Fatalf("the watch read %d route notifications (%d of them the target's own) for 150 writes and a marker, want the marker's alone",
			after.RouteEvents-before.RouteEvents, after.Own-before.Own)
	}
	if n := w.target.ownFilter.failures(); n != 0 {
		t.Fatalf("%d filter updates failed", n)
	}
	w.ip("route", "del", "10.201.60.0/24", "proto", "254")
	w.repaired(1)
	w.expectOurs(append([]string{"blackhole 10.200.0.0/24 table main metric 0"}, func() []string {
		var out []string
		for i := 50; i < 100; i++ {
			out = append(out, fmt.Sprintf("blackhole 10.201.%d.0/24 table main metric 0", i))
		}
		return out
	}()...)...)
}

// TestWatchedCompact: the watch's record of 20,000 routes (a device and a
// next hop each), of which all but 10 are deleted, holds the memory of 10
// routes once compacted, as after 10 alone; the 10 are still known.
func TestWatchedCompact(t *testing.T) {
	route := func(i int) *Route {
		return &Route{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32),
			Via: netip.MustParseAddr("192.0.2.1"), Dev: "eth0"}
	}
	fill := func(w *watched, n int) {
		for i := range n {
			r := route(i)
			w.track(r)
			w.expect(kroute{key: r.Key(), via: r.Via, oif: 2})
		}
	}
	base := liveHeap()
	small := &watched{}
	fill(small, 10)
	alone := int64(liveHeap()) - int64(base)

	base = liveHeap()
	big := &watched{}
	fill(big, 20_000)
	big.compact() // as after the batch that applied them
	for i := 10; i < 20_000; i++ {
		big.untrack(route(i).Key())
	}
	big.compact()
	after := int64(liveHeap()) - int64(base)
	t.Logf("10 routes: %d KB; 10 routes after 20,000: %d KB", alone>>10, after>>10)
	if after-alone > 100<<10 {
		t.Fatalf("the watch's record kept %d KB after 20,000 routes came and went", (after-alone)>>10)
	}
	if len(big.installed) != 10 || len(big.dev) != 10 || len(big.via) != 10 || len(big.byDev["eth0"]) != 10 {
		t.Fatalf("after compacting: %d installed, %d with a device, %d via, %d on eth0; want 10 each",
			len(big.installed), len(big.dev), len(big.via), len(big.byDev["eth0"]))
	}
	runtime.KeepAlive(small)
	runtime.KeepAlive(big)
}

// liveHeap is memtest.LiveHeap.
var liveHeap = memtest.LiveHeap
