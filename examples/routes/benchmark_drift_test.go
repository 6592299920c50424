package routes

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/steadystate/steadystate/examples/netnstest"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
	"github.com/steadystate/steadystate/statedb"
)

// repairTrials is the number of trials of BenchmarkRepairDrift.
const repairTrials = 100

// BenchmarkRepairDrift measures how long a route deleted by hand stays
// gone: 10k routes are applied by a reconciler with the defaults of
// ReconcilerConfig (no refresh by age: the target's watch reports the
// deletion), then, 100 times, one of them is deleted with `ip route del`,
// and the time from the kernel's notification of the deletion to its
// notification of the route's return (read on a socket of the benchmark's
// own) is one sample. It reports p50-ms, p99-ms and max-ms over the 100
// trials of each iteration.
func BenchmarkRepairDrift(b *testing.B) {
	netnstest.RequireRoot(b)
	ns, del := benchNS(b)
	defer del()
	db := statedb.New()
	table, err := NewTable(db)
	if err != nil {
		b.Fatal(err)
	}
	target, err := NewTarget(TargetConfig{NetNS: string(ns)})
	if err != nil {
		b.Fatal(err)
	}
	defer target.Close()
	cfg := ReconcilerConfig(table, target)
	cfg.Logger = slog.New(slog.DiscardHandler) // a line per repair
	r := reconcilertest.Start(b, db, cfg)
	defer r.Stop()
	prefixes := benchPrefixes(benchRoutes)
	wtxn := db.WriteTxn(table)
	for _, p := range prefixes {
		table.Insert(wtxn, (&Route{Prefix: p, Type: TypeBlackhole}).SetStatus(reconciler.StatusPending()))
	}
	rev := table.Revision(wtxn.Commit())
	if _, err := r.WaitUntilReconciled(context.Background(), rev); err != nil {
		b.Fatal(err)
	}

	// The benchmark's own view of the kernel's route notifications.
	h, err := netns.GetFromPath(string(ns))
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	updates := make(chan netlink.RouteUpdate, 1024)
	done := make(chan struct{})
	if err := netlink.RouteSubscribeWithOptions(updates, done, netlink.RouteSubscribeOptions{Namespace: &h}); err != nil {
		b.Fatal(err)
	}
	defer func() {
		close(done)
		for range updates {
		}
	}()
	// await returns when the kernel notifies typ for prefix i's route.
	await := func(i int, typ uint16) time.Time {
		want := NewRouteKey(0, prefixes[i], 0)
		timeout := time.After(30 * time.Second)
		for {
			select {
			case u := <-updates:
				if k, ok := kernelKey(u.Route); ok && k == want && u.Type == typ && int(u.Protocol) == DefaultProtocol {
					return time.Now()
				}
			case <-timeout:
				b.Fatalf("no notification %d for route %s within 30s", typ, prefixes[i])
			}
		}
	}

	var samples []time.Duration
	trial := 0
	for b.Loop() {
		samples = samples[:0]
		for range repairTrials {
			i := (trial * 97) % len(prefixes) // spread over the table
			trial++
			if _, err := ns.Command("ip", "route", "del", prefixes[i].String(), "proto", fmt.Sprint(DefaultProtocol)); err != nil {
				b.Fatal(err)
			}
			gone := await(i, unix.RTM_DELROUTE)
			back := await(i, unix.RTM_NEWROUTE)
			samples = append(samples, back.Sub(gone))
		}
	}
	reportLatencies(b, samples)
	// The last route is back in the kernel, but its Done may not be
	// written yet (it is Refreshing until the repair's outcome is): wait
	// on the table, not on a timer, for every route to be Done again.
	timeout := time.After(30 * time.Second)
	for {
		txn := db.ReadTxn()
		_, watch := table.AllWatch(txn)
		n := 0
		for range table.List(txn, StatusIndex.Query(reconciler.StatusKindDone)) {
			n++
		}
		if n == len(prefixes) {
			break
		}
		select {
		case <-watch:
		case <-timeout:
			b.Fatalf("%d of %d routes Done 30s after the trials", n, len(prefixes))
		}
	}
}

// reportLatencies reports the p50, p99 and maximum of samples in ms.
func reportLatencies(b *testing.B, samples []time.Duration) {
	slices.Sort(samples)
	pick := func(q float64) float64 {
		return float64(samples[min(len(samples)-1, int(q*float64(len(samples))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pick(0.50), "p50-ms")
	b.ReportMetric(pick(0.99), "p99-ms")
	b.ReportMetric(float64(samples[len(samples)-1])/float64(time.Millisecond), "max-ms")
}
