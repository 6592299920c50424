package cilium

import (
	"runtime"
	"runtime/metrics"
	"testing"
)

const (
	// alternateKeys is the number of keys of each table of Alternate; its
	// writers cycle over them, so that live data stays the same.
	alternateKeys = 1000
	// alternateBatch is the number of objects per transaction.
	alternateBatch = 10
)

// retainedTxns is the number of transactions over which retained-B/txn is
// measured.
func retainedTxns() int { return sized(20_000, 2_000) }

// BenchmarkAlternate commits a batch of 10 new objects per op, to table A
// in even ops and to table B in odd ones, each table cycling over its 1000
// keys (both start full). After the timed loop it measures retained-B/txn:
// the live heap after a GC, before and after 20k more such transactions,
// divided by their number (0 if it shrank). Live data is the same at both
// ends, so this is what the database keeps per transaction committed.
func BenchmarkAlternate(b *testing.B) {
	newSS := func(tb testing.TB) alternator { return prefilled(newSSDB(tb, "a", "b")) }
	newCilium := func(tb testing.TB) alternator { return prefilled(newCiDB(tb, "a", "b")) }
	pair(b, newSS, newCilium, func(b *testing.B, a alternator) {
		k := 0
		for b.Loop() {
			a.fill(k%2, alternateWindow(k))
			k++
		}
		reportObjectsPerSec(b, k*alternateBatch)
		b.ReportMetric(retainedPerTxn(a, k, retainedTxns()), "retained-B/txn")
	})
}

// alternator is a side of Alternate: tables 0 (A) and 1 (B).
type alternator interface {
	// fill inserts a new object for each id into table t and commits.
	fill(t int, ids []uint64)
}

// prefilled fills both tables with every key.
func prefilled(a alternator) alternator {
	a.fill(0, ids(alternateKeys))
	a.fill(1, ids(alternateKeys))
	return a
}

// alternateIDs holds the keys 0..alternateKeys-1; op k writes a window of
// it.
var alternateIDs = ids(alternateKeys)

// alternateWindow returns the keys of op k: op k writes table k%2, and the
// ops of one table walk its keys alternateBatch at a time.
func alternateWindow(k int) []uint64 {
	start := (k / 2 * alternateBatch) % alternateKeys
	return alternateIDs[start : start+alternateBatch]
}

// retainedPerTxn runs n more ops of Alternate, from op k on, and returns
// the growth of the live heap over them per op, or 0 if it shrank.
func retainedPerTxn(a alternator, k, n int) float64 {
	before := liveHeap()
	for i := k; i < k+n; i++ {
		a.fill(i%2, alternateWindow(i))
	}
	after := liveHeap()
	// a (the database) must be alive at both ends, or the second GC would
	// free it with whatever it kept.
	runtime.KeepAlive(a)
	return max(0, float64(after)-float64(before)) / float64(n)
}

// liveHeap returns the bytes of heap objects that a full GC found alive.
// Two GCs: the first moves sync.Pool contents to the victim cache, the
// second drops them, so that pools count the same at both ends.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
