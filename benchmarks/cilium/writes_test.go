package cilium

import (
	"math/rand/v2"
	"strconv"
	"testing"

	cstatedb "github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/steadystate/steadystate/statedb"
	"github.com/steadystate/steadystate/statedb/statedbcell"
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

// replaceTableSize is the size of the table of Replace.
const replaceTableSize = 1000

// BenchmarkReplace commits a transaction of batch objects (1 or 10) per op
// into a table of 1000, replacing stored objects: op k writes the IDs
// k*batch..k*batch+batch-1 (mod 1000), so that the writes cycle over the
// whole table. It is WriteTxn/batch=N where the table is full, as a node
// agent's tables are: every write copies the path to its object in a tree
// of 1000 (and the revision index's), not in a tree of N.
func BenchmarkReplace(b *testing.B) {
	for _, batch := range []int{1, 10} {
		b.Run("table=1000/batch="+strconv.Itoa(batch), func(b *testing.B) {
			all := ids(replaceTableSize)
			newSS := func(tb testing.TB) writer { s := newSSDB(tb, "objects"); s.fill(0, all); return s }
			newCilium := func(tb testing.TB) writer { c := newCiDB(tb, "objects"); c.fill(0, all); return c }
			pair(b, newSS, newCilium, func(b *testing.B, w writer) {
				n := 0
				for k := 0; b.Loop(); k++ {
					start := k * batch % replaceTableSize
					w.insert(all[start : start+batch])
					n += batch
				}
				reportObjectsPerSec(b, n)
			})
		})
	}
}

// BenchmarkWriteTxnMetrics is WriteTxn/batch=1 with each side's metrics
// on: steadystate's Prometheus implementation (statedbcell, with a
// registry of its own) and cilium's expvar one (unpublished), in cilium's
// BenchmarkDB_WriteTxn_1_ExpVarMetrics shape. A program that exports its
// database's metrics pays this on every commit.
func BenchmarkWriteTxnMetrics(b *testing.B) {
	keys := ids(1)
	newSS := func(tb testing.TB) writer {
		m, err := statedbcell.NewPrometheusMetrics(prometheus.NewRegistry())
		if err != nil {
			tb.Fatal(err)
		}
		return newSSDBWith(tb, []statedb.Option{statedb.WithMetrics(m)}, "objects")
	}
	newCilium := func(tb testing.TB) writer {
		return newCiDBWith(tb, []cstatedb.Option{cstatedb.WithMetrics(cstatedb.NewExpVarMetrics(false))}, "objects")
	}
	pair(b, newSS, newCilium, func(b *testing.B, w writer) {
		n := 0
		for b.Loop() {
			w.insert(keys)
			n++
		}
		reportObjectsPerSec(b, n)
	})
}
