package radix

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentReaders has readers iterate, look up and watch committed
// trees while a writer keeps committing new versions, under -race.
func TestConcurrentReaders(t *testing.T) {
	const versions, perVersion = 1000, 20
	key := func(i int) []byte { return binary.BigEndian.AppendUint64([]byte("k"), uint64(i)) }

	var current atomic.Pointer[Tree[int]]
	current.Store(New[int]())
	var done atomic.Bool
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for !done.Load() {
				tree := current.Load()
				n := 0
				for k, v := range tree.Root().All {
					if got := int(binary.BigEndian.Uint64(k[1:])); got != v {
						t.Errorf("key %d holds %d", got, v)
						return
					}
					n++
				}
				if n != tree.Len() {
					t.Errorf("iterated %d keys, Len %d", n, tree.Len())
					return
				}
				// The next version inserts the key after the largest.
				next := 0
				if k, _, ok := tree.Root().Maximum(); ok {
					next = int(binary.BigEndian.Uint64(k[1:])) + 1
				}
				ch, _, _ := tree.Root().GetWatch(key(next))
				if current.Load() != tree {
					<-ch // the writer moved on, so this must close
				}
			}
		})
	}
	tree := current.Load()
	for v := range versions {
		txn := tree.Txn()
		txn.TrackMutate(true)
		for i := range perVersion {
			k := v*perVersion + i
			txn.Insert(key(k), k)
		}
		if v > 0 {
			for k := (v - 1) * perVersion; k < v*perVersion; k += 7 {
				txn.Delete(key(k))
			}
		}
		tree = txn.CommitOnly()
		current.Store(tree)
		txn.Notify()
	}
	done.Store(true)
	wg.Wait()
}
