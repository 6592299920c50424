package scaling

import (
	"fmt"
	"math/rand/v2"
	"testing"

	iradix "github.com/hashicorp/go-immutable-radix/v2"
	memdb "github.com/hashicorp/go-memdb"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/statedb"
)

// object is what every implementation stores, by pointer.
type object struct {
	ID    uint64
	Name  string
	Value int
}

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

// store is one implementation, reduced to what the scaling workloads need.
type store interface {
	// write inserts or replaces objs in one committed transaction.
	write(objs []*object)
	// lookup gets each id by primary key from one snapshot and returns how
	// many were found.
	lookup(ids []uint64) int
}

// writeAll writes objs in transactions of batchSize objects.
func writeAll(s store, objs []*object) {
	for i := 0; i < len(objs); i += batchSize {
		s.write(objs[i:min(i+batchSize, len(objs))])
	}
}

// impls are the implementations in the order they are reported. map is a
// plain Go map: not a database (no snapshots, no transactions), it bounds
// what is possible.
var impls = []struct {
	name string
	new  func(tb testing.TB) store
}{
	{"statedb", newStatedbStore},
	{"memdb", newMemdbStore},
	{"iradix", newIradixStore},
	{"map", newMapStore},
}

// --- steadystate statedb ---

var idIndex = statedb.Index[*object, uint64]{
	Name:       "id",
	FromObject: func(o *object) index.KeySet { return index.NewKeySet(index.Uint64(o.ID)) },
	FromKey:    index.Uint64,
	Unique:     true,
}

type statedbStore struct {
	db  *statedb.DB
	tbl statedb.RWTable[*object]
}

func newStatedbStore(tb testing.TB) store {
	db := statedb.New()
	tbl, err := statedb.NewTable(db, "objects", idIndex)
	if err != nil {
		tb.Fatal(err)
	}
	return &statedbStore{db: db, tbl: tbl}
}

func (s *statedbStore) write(objs []*object) {
	wtxn := s.db.WriteTxn(s.tbl)
	for _, o := range objs {
		if _, _, err := s.tbl.Insert(wtxn, o); err != nil {
			panic(err)
		}
	}
	wtxn.Commit()
}

func (s *statedbStore) lookup(ids []uint64) int {
	txn := s.db.ReadTxn()
	n := 0
	for _, id := range ids {
		if _, _, ok := s.tbl.Get(txn, idIndex.Query(id)); ok {
			n++
		}
	}
	return n
}

// --- hashicorp/go-memdb ---

const memdbTable = "objects"

type memdbStore struct{ db *memdb.MemDB }

func newMemdbStore(tb testing.TB) store {
	db, err := memdb.NewMemDB(&memdb.DBSchema{Tables: map[string]*memdb.TableSchema{
		memdbTable: {Name: memdbTable, Indexes: map[string]*memdb.IndexSchema{
			"id": {Name: "id", Unique: true, Indexer: &memdb.UintFieldIndex{Field: "ID"}},
		}},
	}})
	if err != nil {
		tb.Fatal(err)
	}
	return &memdbStore{db: db}
}

func (s *memdbStore) write(objs []*object) {
	txn := s.db.Txn(true)
	for _, o := range objs {
		if err := txn.Insert(memdbTable, o); err != nil {
			panic(err)
		}
	}
	txn.Commit()
}

func (s *memdbStore) lookup(ids []uint64) int {
	txn := s.db.Txn(false)
	n := 0
	for _, id := range ids {
		o, err := txn.First(memdbTable, "id", id)
		if err != nil {
			panic(err)
		}
		if o != nil {
			n++
		}
	}
	return n
}

// --- raw go-immutable-radix/v2 ---

// iradixStore is the floor of statedb's design: one tree keyed as statedb's
// index package encodes, no revisions, no watch channels, no checks.
type iradixStore struct{ tree *iradix.Tree[*object] }

func newIradixStore(testing.TB) store { return &iradixStore{tree: iradix.New[*object]()} }

func (s *iradixStore) write(objs []*object) {
	txn := s.tree.Txn()
	for _, o := range objs {
		txn.Insert(index.Uint64(o.ID), o)
	}
	s.tree = txn.Commit()
}

func (s *iradixStore) lookup(ids []uint64) int {
	root := s.tree.Root()
	n := 0
	for _, id := range ids {
		if _, ok := root.Get(index.Uint64(id)); ok {
			n++
		}
	}
	return n
}

// --- plain Go map ---

type mapStore struct{ m map[uint64]*object }

func newMapStore(testing.TB) store { return &mapStore{m: map[uint64]*object{}} }

func (s *mapStore) write(objs []*object) {
	for _, o := range objs {
		s.m[o.ID] = o
	}
}

func (s *mapStore) lookup(ids []uint64) int {
	n := 0
	for _, id := range ids {
		if _, ok := s.m[id]; ok {
			n++
		}
	}
	return n
}
