package shrink

import (
	"maps"
	"runtime"
	"testing"

	"github.com/steadystate/steadystate/internal/memtest"
)

// TestMap: a map that held 100,000 keys and holds 10 is given back as a
// copy of its 10 (its live memory that of 10 keys), with the same keys and
// values; a small map, or one above a quarter of its peak, is kept.
func TestMap(t *testing.T) {
	m := map[int]int{}
	peak := 0
	for i := range 100_000 {
		m[i] = i
	}
	if got := Map(m, &peak); peak != 100_000 || !same(got, m) {
		t.Fatalf("peak %d after 100,000 keys (want 100000), the map kept: %v", peak, same(got, m))
	}
	for i := range 70_000 {
		delete(m, i)
	}
	if got := Map(m, &peak); !same(got, m) || peak != 100_000 {
		t.Fatal("a map above a quarter of its peak was made again")
	}
	for i := 70_000; i < 99_990; i++ {
		delete(m, i)
	}
	want := maps.Clone(m)
	before := liveHeap()
	got := Map(m, &peak)
	if same(got, m) {
		t.Fatal("a map at a tenth of a thousandth of its peak was kept")
	}
	m = nil
	after := liveHeap()
	if !maps.Equal(got, want) || peak != 10 {
		t.Fatalf("after shrinking: %v, peak %d; want %v, peak 10", got, peak, want)
	}
	if freed := int64(before) - int64(after); freed < 1<<20 {
		t.Fatalf("shrinking a map of 10 left of 100,000 freed %d KB", freed>>10)
	}
	runtime.KeepAlive(got)

	small, p := map[int]int{}, 0
	for i := range 1000 {
		small[i] = i
	}
	Map(small, &p)
	clear(small)
	if got := Map(small, &p); !same(got, small) {
		t.Fatal("a map of at most Above keys was made again")
	}
}

// same reports whether a and b are one map: a write to one shows in the
// other.
func same(a, b map[int]int) bool {
	a[-1] = 1
	_, ok := b[-1]
	delete(a, -1)
	return ok
}

// liveHeap is memtest.LiveHeap.
var liveHeap = memtest.LiveHeap
