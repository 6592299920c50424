package cilium

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// object is what both sides store, by pointer. Batch tells a reader which
// write of an ID it sees.
type object struct {
	ID    uint64
	Batch int
}

// TableHeader and TableRow make object storable in cilium's tables (their
// script commands print tables with them); steadystate does not use them.
func (o *object) TableHeader() []string { return []string{"ID", "Batch"} }
func (o *object) TableRow() []string {
	return []string{strconv.FormatUint(o.ID, 10), strconv.Itoa(o.Batch)}
}

// rounds is how often each pair runs in one process: every target against
// cilium is the median over at least five rounds of the per-round ratio.
// The order of the sides rotates by round.
const rounds = 5

// The names of the sides, as the impl=... element of a benchmark.
const (
	implSteadystate = "steadystate"
	implCilium      = "cilium"
	// implCiliumLean is cilium's reconciler without its default metrics.
	implCiliumLean = "cilium-lean"
)

// side is one implementation of a workload: its impl=... name and the
// constructor of its instance.
type side[S any] struct {
	name string
	new  func(testing.TB) S
}

// pair runs run on steadystate (newSS) and cilium (newCilium) in every
// round; see compare.
func pair[S any](b *testing.B, newSS, newCilium func(testing.TB) S, run func(b *testing.B, s S)) {
	compare(b, []side[S]{{implSteadystate, newSS}, {implCilium, newCilium}}, run)
}

// compare runs run on each side in every round, as sub-benchmarks
// round=<r>/impl=<name>. The order rotates by round (round r starts with
// side r mod n), so that for two sides steadystate goes first in even
// rounds and cilium in odd ones. A side's constructor builds its instance
// once per sub-benchmark, untimed.
func compare[S any](b *testing.B, sides []side[S], run func(b *testing.B, s S)) {
	for r := range rounds {
		b.Run("round="+strconv.Itoa(r), func(b *testing.B) {
			k := r % len(sides)
			for _, s := range slices.Concat(sides[k:], sides[:k]) {
				b.Run("impl="+s.name, func(b *testing.B) {
					inst := s.new(b)
					b.ReportAllocs()
					run(b, inst)
				})
			}
		})
	}
}

// sized returns full, or short under -short.
func sized(full, short int) int {
	if testing.Short() {
		return short
	}
	return full
}

// ids returns 0..n-1.
func ids(n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i)
	}
	return out
}

func reportObjectsPerSec(b *testing.B, objects int) {
	b.ReportMetric(float64(objects)/b.Elapsed().Seconds(), "objects/sec")
}

// reportPercentiles reports p50, p90 and p99 of lat in microseconds, as
// benchmarks/scaling does.
func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(float64(len(lat))*p))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(at(0.50), "p50-us")
	b.ReportMetric(at(0.90), "p90-us")
	b.ReportMetric(at(0.99), "p99-us")
}

// must panics on err: a failed write in a timed loop is a bug of the
// benchmark, not something to measure.
func must(err error) {
	if err != nil {
		panic(fmt.Sprintf("benchmark write failed: %v", err))
	}
}
