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

// TestLeafSize: a leaf with statedb's 24-byte value is 48 bytes, the size
// class below 64 (see Node); a field more would cost every object 32 bytes.
func TestLeafSize(t *testing.T) {
	type object struct {
		data     any
		revision uint64
	}
	if size := unsafe.Sizeof(Node[object]{}); size != 48 {
		t.Fatalf("a leaf is %d bytes, want 48", size)
	}
}
