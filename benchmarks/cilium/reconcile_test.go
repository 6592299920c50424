package cilium

import (
	"strconv"
	"testing"
	"time"

	"github.com/steadystate/steadystate/benchmarks/internal/reconcilers"
)

// BenchmarkReconcile is cilium's reconciler benchmark (a program there; see
// package reconcilers): per op, a new database and reconciler with a no-op
// target; N objects inserted as Pending in transactions of 1000 and waited
// for until the last one is Done (all are checked afterwards, untimed). It
// reports objects/sec of that and heap-MB, runtime.MemStats.HeapInuse after
// a GC with the table and its reconciler alive.
//
// cilium runs twice: impl=cilium as its program runs it (the reconciler's
// default metrics, expvar maps updated per object), and impl=cilium-lean
// with a no-op Metrics, which is faster and the fairer match for
// steadystate's reconciler, whose default is no metrics.
func BenchmarkReconcile(b *testing.B) {
	n := sized(1_000_000, 100_000)
	b.Run("objects="+strconv.Itoa(n), func(b *testing.B) {
		constant := func(r reconcilers.Run) func(testing.TB) reconcilers.Run {
			return func(testing.TB) reconcilers.Run { return r }
		}
		sides := []side[reconcilers.Run]{
			{implSteadystate, constant(reconcilers.Steadystate)},
			{implCilium, constant(reconcilers.Cilium(false))},
			{implCiliumLean, constant(reconcilers.Cilium(true))},
		}
		compare(b, sides, func(b *testing.B, run reconcilers.Run) {
			var total time.Duration
			var heap uint64
			ops := 0
			for b.Loop() {
				var d time.Duration
				d, heap = run(b, n)
				total += d
				ops++
			}
			b.ReportMetric(float64(ops*n)/total.Seconds(), "objects/sec")
			b.ReportMetric(float64(heap)/(1<<20), "heap-MB")
		})
	})
}
