package scaling

import (
	"testing"
	"time"

	"github.com/steadystate/steadystate/benchmarks/internal/reconcilers"
)

// reconcileImpls are the reconcilers of BenchmarkReconcile: steadystate's,
// and cilium's as its benchmark program runs it and with a no-op Metrics
// (see package reconcilers).
var reconcileImpls = []struct {
	name string
	run  reconcilers.Run
}{
	{"steadystate", reconcilers.Steadystate},
	{"cilium", reconcilers.Cilium(false)},
	{"cilium-lean", reconcilers.Cilium(true)},
}

// BenchmarkReconcile is the workload of cilium's reconciler benchmark at
// every size, on each reconciler: insert N Pending objects in transactions
// of 1000 into a table with a no-op target and wait until every object is
// Done. It reports objects/sec and ns/object of that, and the heap in use
// afterwards (runtime.MemStats.HeapInuse after a GC, with the table alive)
// in MB and per object.
func BenchmarkReconcile(b *testing.B) {
	forEachSize(b, func(b *testing.B, n int) {
		for _, impl := range reconcileImpls {
			b.Run("impl="+impl.name, func(b *testing.B) {
				var total time.Duration
				var heap uint64
				ops := 0
				for b.Loop() {
					var d time.Duration
					d, heap = impl.run(b, n)
					total += d
					ops++
				}
				reportPerObject(b, ops*n, float64(total.Nanoseconds()))
				b.ReportMetric(float64(heap)/(1<<20), "heap-MB")
				b.ReportMetric(float64(heap)/float64(n), "heap-B/object")
			})
		}
	})
}
