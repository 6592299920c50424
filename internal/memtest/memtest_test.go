package memtest

import (
	"runtime"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestLiveHeap: 8 MB kept shows in the live heap (7 MB or more: the race
// detector moves the rest), and goes once dropped.
func TestLiveHeap(t *testing.T) {
	base := LiveHeap()
	b := make([]byte, 8<<20)
	held := LiveHeap()
	runtime.KeepAlive(b)
	b = nil
	gone := LiveHeap()
	if int64(held)-int64(base) < 7<<20 || int64(held)-int64(gone) < 7<<20 {
		t.Fatalf("live heap %d KB, %d KB with 8 MB held, %d KB once dropped", base>>10, held>>10, gone>>10)
	}
	_ = b
}
