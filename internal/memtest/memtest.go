// Package memtest measures memory for the tests that check that memory
// follows live data.
package memtest

import "runtime"

// LiveHeap returns the bytes of live heap after a full collection (two:
// the second frees what the first's finalizers and pools let go).
func LiveHeap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
