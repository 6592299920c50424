package routes

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/steadystate/steadystate/examples/netnstest"
	"github.com/steadystate/steadystate/examples/netnsutil"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
	"github.com/steadystate/steadystate/statedb"
)

// benchRoutes is the number of routes of BenchmarkApply.
const benchRoutes = 10_000

// benchPrefixes returns n distinct /24 prefixes, 10.x.y.0/24.
func benchPrefixes(n int) []netip.Prefix {
	out := make([]netip.Prefix, n)
	for i := range out {
		out[i] = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24)
	}
	return out
}

// BenchmarkApply installs 10k blackhole routes into a fresh namespace, in
// two ways, each sub-benchmark timing only the installation (creating and
// deleting the namespace is outside the timer):
//
//   - impl=reconciler: insert 10k Route objects into a routes table in one
//     transaction and wait until the reconciler, applying them with the
//     Target, has them all Done.
//   - impl=ip-batch: the baseline, `ip -batch FILE` with the same 10k
//     `route add blackhole ... proto 254` lines, run in the namespace.
//
// Both report seconds per 10k and objects/sec; impl=reconciler also
// reports x-ip-batch, its time as a multiple of the baseline's measured
// just before it (when both run).
func BenchmarkApply(b *testing.B) {
	netnstest.RequireRoot(b)
	prefixes := benchPrefixes(benchRoutes)

	// The baseline runs first, so that the reconciler can report its
	// time as a multiple of the baseline's in the same run.
	var baseline float64
	b.Run("impl=ip-batch", func(b *testing.B) {
		var sb strings.Builder
		for _, p := range prefixes {
			fmt.Fprintf(&sb, "route add blackhole %s proto %d\n", p, DefaultProtocol)
		}
		file := filepath.Join(b.TempDir(), "routes.batch")
		if err := os.WriteFile(file, []byte(sb.String()), 0o644); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			b.StopTimer()
			ns, del := benchNS(b)
			b.StartTimer()
			if _, err := ns.Command("ip", "-batch", file); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			del()
			b.StartTimer()
		}
		baseline = reportApply(b)
	})

	b.Run("impl=reconciler", func(b *testing.B) {
		routes := make([]*Route, len(prefixes))
		for i, p := range prefixes {
			routes[i] = &Route{Prefix: p, Type: TypeBlackhole}
		}
		for b.Loop() {
			b.StopTimer()
			ns, del := benchNS(b)
			applyWithReconciler(b, ns, routes)
			b.StopTimer()
			del()
			b.StartTimer()
		}
		if secs := reportApply(b); baseline > 0 {
			b.ReportMetric(secs/baseline, "x-ip-batch")
		}
	})
}

// reportApply reports seconds per 10k routes and objects/sec, and returns
// the former.
func reportApply(b *testing.B) float64 {
	secs := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(secs, "sec/10k")
	b.ReportMetric(benchRoutes/secs, "objects/sec")
	return secs
}

// applyWithReconciler sets up a table, a target and a running reconciler
// in ns (untimed), then times inserting routes until all are reconciled.
// It returns with the timer stopped.
func applyWithReconciler(b *testing.B, ns netnsutil.NS, routes []*Route) {
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
	r := reconcilertest.Start(b, db, ReconcilerConfig(table, target))
	defer r.Stop()

	b.StartTimer()
	wtxn := db.WriteTxn(table)
	for _, rt := range routes {
		if _, _, err := table.Insert(wtxn, rt.Clone().SetStatus(reconciler.StatusPending())); err != nil {
			b.Fatal(err)
		}
	}
	rev := table.Revision(wtxn.Commit())
	if _, err := r.WaitUntilReconciled(context.Background(), rev); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if n := countDone(db, table); n != len(routes) {
		b.Fatalf("%d of %d routes Done", n, len(routes))
	}
	out, err := ns.Command("ip", "route", "show", "proto", fmt.Sprint(DefaultProtocol))
	if err != nil {
		b.Fatal(err)
	}
	if n := strings.Count(string(out), "\n"); n != len(routes) {
		b.Fatalf("%d of %d routes in the kernel", n, len(routes))
	}
}

func countDone(db *statedb.DB, table statedb.Table[*Route]) int {
	n := 0
	for range table.List(db.ReadTxn(), StatusIndex.Query(reconciler.StatusKindDone)) {
		n++
	}
	return n
}

// benchNS creates a fresh namespace for one iteration. It is deleted by the
// returned function, or at the end of the benchmark if the iteration fails
// before that, so no namespace outlives the run.
func benchNS(b *testing.B) (netnsutil.NS, func()) {
	ns, del, err := netnsutil.NewNamed(fmt.Sprintf("ss-bench-%d", os.Getpid()))
	if err != nil {
		b.Fatal(err)
	}
	done := false
	cleanup := func() {
		if !done {
			done = true
			if err := del(); err != nil {
				b.Error(err)
			}
		}
	}
	b.Cleanup(cleanup)
	return ns, cleanup
}
