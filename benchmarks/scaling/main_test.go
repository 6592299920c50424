package scaling

import (
	"strconv"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// sizes are the table sizes of every scaling benchmark.
var sizes = []int{1_000, 10_000, 100_000, 1_000_000}

// forEachSize runs fn as sub-benchmark objects=<n> for every size; -short
// skips the 1M size.
func forEachSize(b *testing.B, fn func(b *testing.B, n int)) {
	for _, n := range sizes {
		if testing.Short() && n >= 1_000_000 {
			continue
		}
		b.Run("objects="+strconv.Itoa(n), func(b *testing.B) { fn(b, n) })
	}
}

// reportPerObject reports the cost per object and objects per second of
// objects handled in d nanoseconds.
func reportPerObject(b *testing.B, objects int, nanos float64) {
	b.ReportMetric(nanos/float64(objects), "ns/object")
	b.ReportMetric(float64(objects)/(nanos/1e9), "objects/sec")
}
