package radix

import (
	"bytes"
	"math/rand/v2"
	"testing"
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
