package scaling

import (
	"fmt"
	"math/rand/v2"

	"github.com/steadystate/steadystate/benchmarks/internal/stores"
)

// object is what every implementation stores (see package stores).
type object = stores.Object

// newObjects returns n objects with IDs 0..n-1, in order: a bulk load of
// consecutive keys, as the reconciler workload writes them. (Random key
// order costs the persistent trees a path copy of wide nodes per batch; at
// 1M it makes go-memdb and raw iradix take minutes, beyond make bench's
// budget.)
func newObjects(n int) []*object {
	objs := make([]*object, n)
	for id := range objs {
		objs[id] = &object{ID: uint64(id), Name: fmt.Sprintf("obj-%d", id), Value: id}
	}
	return objs
}

// shuffledIDs returns 0..n-1 in random order.
func shuffledIDs(n int) []uint64 {
	ids := make([]uint64, n)
	for i, id := range rand.New(rand.NewPCG(2, uint64(n))).Perm(n) {
		ids[i] = uint64(id)
	}
	return ids
}

// batchSize is the number of objects per write transaction.
const batchSize = 1000

// writeAll writes objs in transactions of batchSize objects.
func writeAll(s stores.Store, objs []*object) {
	for i := 0; i < len(objs); i += batchSize {
		s.Write(objs[i:min(i+batchSize, len(objs))])
	}
}

// impls are the implementations in the order they are reported. map is a
// plain Go map: not a database (no snapshots, no transactions), it bounds
// what is possible.
var impls = []struct {
	name string
	new  func() stores.Store
}{
	{"statedb", func() stores.Store { return stores.Must(stores.NewStatedb(false)) }},
	{"cilium", func() stores.Store { return stores.Must(stores.NewCilium(false)) }},
	{"memdb", func() stores.Store { return stores.Must(stores.NewMemdb(false)) }},
	{"iradix", func() stores.Store { return stores.Must(stores.NewIradix(false)) }},
	{"map", func() stores.Store { return stores.NewMap() }},
}

// idIndex is the primary index of the statedb tables of the workloads.
var idIndex = stores.IDIndex
