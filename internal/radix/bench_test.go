package radix

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	iradix "github.com/hashicorp/go-immutable-radix/v2"
)

// Every benchmark runs the same work on this package ("radix") and on
// iradix v2 ("iradix") so that one run gives the comparison.

type keyKind struct {
	name string
	key  func(i int) []byte
}

var keyKinds = []keyKind{
	{"uint64", func(i int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(i)) }},
	{"string", func(i int) []byte { return fmt.Appendf(nil, "obj-%d", i) }},
}

// shuffledKeys returns keys 0..n-1 in random order.
func shuffledKeys(kk keyKind, n int) [][]byte {
	keys := make([][]byte, n)
	for i, j := range rand.New(rand.NewPCG(1, 1)).Perm(n) {
		keys[i] = kk.key(j)
	}
	return keys
}

func buildBoth(keys [][]byte) (*Tree[int], *iradix.Tree[int]) {
	txn, ref := New[int]().Txn(), iradix.New[int]().Txn()
	for i, k := range keys {
		txn.Insert(k, i)
		ref.Insert(k, i)
	}
	return txn.Commit(), ref.Commit()
}

func reportObjects(b *testing.B, perOp int) {
	b.ReportMetric(float64(b.N*perOp)/b.Elapsed().Seconds(), "objects/sec")
}

// BenchmarkTxnInsertOne commits one-key write txns (replacing a key) into a
// 1000-key tree, with mutation tracking on as statedb does.
func BenchmarkTxnInsertOne(b *testing.B) {
	for _, kk := range keyKinds {
		keys := shuffledKeys(kk, 1000)
		tree, ref := buildBoth(keys)
		b.Run("radix/"+kk.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				txn := tree.Txn()
				txn.TrackMutate(true)
				txn.Insert(keys[i%len(keys)], i)
				tree = txn.Commit()
				i++
			}
			reportObjects(b, 1)
		})
		b.Run("iradix/"+kk.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				txn := ref.Txn()
				txn.TrackMutate(true)
				txn.Insert(keys[i%len(keys)], i)
				ref = txn.Commit()
				i++
			}
			reportObjects(b, 1)
		})
	}
}

// BenchmarkTxnInsertBatch commits txns of 100 inserts of new, increasing
// keys, the tree growing as it goes.
func BenchmarkTxnInsertBatch(b *testing.B) {
	const batch = 100
	for _, kk := range keyKinds {
		b.Run("radix/"+kk.name, func(b *testing.B) {
			b.ReportAllocs()
			tree, next := New[int](), 0
			for b.Loop() {
				txn := tree.Txn()
				txn.TrackMutate(true)
				for range batch {
					txn.Insert(kk.key(next), next)
					next++
				}
				tree = txn.Commit()
			}
			reportObjects(b, batch)
		})
		b.Run("iradix/"+kk.name, func(b *testing.B) {
			b.ReportAllocs()
			tree, next := iradix.New[int](), 0
			for b.Loop() {
				txn := tree.Txn()
				txn.TrackMutate(true)
				for range batch {
					txn.Insert(kk.key(next), next)
					next++
				}
				tree = txn.Commit()
			}
			reportObjects(b, batch)
		})
	}
}

// BenchmarkGet looks up random present keys.
func BenchmarkGet(b *testing.B) {
	for _, size := range []int{1000, 1_000_000} {
		for _, kk := range keyKinds {
			keys := shuffledKeys(kk, size)
			tree, ref := buildBoth(keys)
			name := fmt.Sprintf("%s/%d", kk.name, size)
			b.Run("radix/"+name, func(b *testing.B) {
				i := 0
				for b.Loop() {
					if _, ok := tree.Get(keys[i%size]); !ok {
						b.Fatal("missing key")
					}
					i++
				}
				reportObjects(b, 1)
			})
			b.Run("iradix/"+name, func(b *testing.B) {
				i := 0
				for b.Loop() {
					if _, ok := ref.Get(keys[i%size]); !ok {
						b.Fatal("missing key")
					}
					i++
				}
				reportObjects(b, 1)
			})
		}
	}
}

// BenchmarkIterate walks all keys of a 1000-key tree.
func BenchmarkIterate(b *testing.B) {
	const size = 1000
	for _, kk := range keyKinds {
		tree, ref := buildBoth(shuffledKeys(kk, size))
		b.Run("radix-iterator/"+kk.name, func(b *testing.B) {
			for b.Loop() {
				it := tree.Root().Iterator()
				for _, _, ok := it.Next(); ok; _, _, ok = it.Next() {
				}
			}
			reportObjects(b, size)
		})
		b.Run("radix-all/"+kk.name, func(b *testing.B) {
			for b.Loop() {
				for range tree.Root().All {
				}
			}
			reportObjects(b, size)
		})
		b.Run("iradix/"+kk.name, func(b *testing.B) {
			for b.Loop() {
				it := ref.Root().Iterator()
				for _, _, ok := it.Next(); ok; _, _, ok = it.Next() {
				}
			}
			reportObjects(b, size)
		})
	}
}
