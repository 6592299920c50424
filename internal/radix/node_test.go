package radix

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"unsafe"
)

func TestIndex16(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 100000 {
		var keys [16]byte
		for i := range keys {
			keys[i] = byte(r.IntN(4)) * 0x7f
		}
		size, b := r.IntN(17), byte(r.IntN(4))*0x7f
		if got, want := index16(&keys, size, b), bytes.IndexByte(keys[:size], b); got != want {
			t.Fatalf("index16(%x, %d, %x) = %d, want %d", keys, size, b, got, want)
		}
	}
}

// TestLeafSize: with statedb's 16-byte value a bare leaf is 32 bytes, a
// size class of its own, and a watched leaf 40 (in the class of 48; see
// Node). A word more would put the bare leaf in the class of 48 and cost
// every object 16 bytes.
func TestLeafSize(t *testing.T) {
	type object struct {
		_ unsafe.Pointer // data
		_ uint64         // revision
	}
	if size := unsafe.Sizeof(Node[object]{}); size != 32 {
		t.Fatalf("a bare leaf is %d bytes, want 32", size)
	}
	if size := unsafe.Sizeof(watchedLeaf[object]{}); size != 40 {
		t.Fatalf("a watched leaf is %d bytes, want 40", size)
	}
	if unsafe.Offsetof(watchedLeaf[object]{}.watch) != unsafe.Offsetof(inner[object]{}.watch) {
		t.Fatal("a watched leaf's watch slot is not where inner's is")
	}
}
