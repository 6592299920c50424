package cilium

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// writer is a side of the write shapes: one table.
type writer interface {
	// insert writes a new object for each id in one committed write
	// transaction.
	insert(ids []uint64)
}

func newSSWriter(tb testing.TB) writer     { return newSSDB(tb, "objects") }
func newCiliumWriter(tb testing.TB) writer { return newCiDB(tb, "objects") }

// BenchmarkWriteTxn commits a transaction of batch new objects (IDs
// 0..batch-1, replacing those of the previous op) per op, in cilium's
// BenchmarkDB_WriteTxn_<batch> shape.
func BenchmarkWriteTxn(b *testing.B) {
	for _, batch := range []int{1, 10, 100, 1000} {
		keys := ids(batch)
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) {
			pair(b, newSSWriter, newCiliumWriter, func(b *testing.B, w writer) {
				n := 0
				for b.Loop() {
					w.insert(keys)
					n += batch
				}
				reportObjectsPerSec(b, n)
			})
		})
	}
}

// randomInsertSize is the number of objects of RandomInsert and
// RandomLookup, as in cilium's benchmarks.
const randomInsertSize = 1000

// BenchmarkRandomInsert commits 1000 new objects in a fixed random key
// order per op, in cilium's BenchmarkDB_RandomInsert shape (from the second
// op on, they replace those of the previous op).
func BenchmarkRandomInsert(b *testing.B) {
	keys := shuffled(randomInsertSize, 1)
	pair(b, newSSWriter, newCiliumWriter, func(b *testing.B, w writer) {
		n := 0
		for b.Loop() {
			w.insert(keys)
			n += len(keys)
		}
		reportObjectsPerSec(b, n)
	})
}

// shuffled returns 0..n-1 in a random order fixed by seed.
func shuffled(n int, seed uint64) []uint64 {
	keys := ids(n)
	rand.New(rand.NewPCG(seed, uint64(n))).Shuffle(n, func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	return keys
}

func (s *ssDB) insert(ids []uint64) { s.fill(0, ids) }
func (c *ciDB) insert(ids []uint64) { c.fill(0, ids) }
