package statedb_test

import (
	"fmt"
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

// store is one implementation under test, reduced to the operations the
// workloads need. Each method is one transaction (or one snapshot), so the
// cost of the interface call is spread over the objects it handles.
type store interface {
	// write inserts or replaces objs in one committed transaction.
	write(objs []*object)
	// insertAbort inserts objs in one transaction and aborts it, so the
	// store stays as it was.
	insertAbort(objs []*object)
	// lookup gets each id by primary key from one snapshot and returns how
	// many were found.
	lookup(ids []uint64) int
	// iterate walks every object of one snapshot in primary key order and
	// returns how many there were.
	iterate() int
}

// impls are the implementations in the order they are reported.
var impls = []struct {
	name string
	new  func(b *testing.B, secondary bool) store
}{
	{"statedb", newStatedbStore},
	{"memdb", newMemdbStore},
	{"iradix", newIradixStore},
}

// --- steadystate statedb ---

var (
	idIndex = statedb.Index[*object, uint64]{
		Name:       "id",
		FromObject: func(o *object) index.KeySet { return index.NewKeySet(index.Uint64(o.ID)) },
		FromKey:    index.Uint64,
		Unique:     true,
	}
	nameIndex = statedb.Index[*object, string]{
		Name:       "name",
		FromObject: func(o *object) index.KeySet { return index.NewKeySet(index.String(o.Name)) },
		FromKey:    index.String,
	}
)

type statedbStore struct {
	db  *statedb.DB
	tbl statedb.RWTable[*object]
}

func newStatedbStore(b *testing.B, secondary bool) store {
	db := statedb.New()
	var idx []statedb.Indexer[*object]
	if secondary {
		idx = append(idx, nameIndex)
	}
	tbl, err := statedb.NewTable(db, "objects", idIndex, idx...)
	if err != nil {
		b.Fatal(err)
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

func (s *statedbStore) insertAbort(objs []*object) {
	wtxn := s.db.WriteTxn(s.tbl)
	for _, o := range objs {
		if _, _, err := s.tbl.Insert(wtxn, o); err != nil {
			panic(err)
		}
	}
	wtxn.Abort()
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

func (s *statedbStore) iterate() int {
	n := 0
	for range s.tbl.All(s.db.ReadTxn()) {
		n++
	}
	return n
}

// --- hashicorp/go-memdb ---

const memdbTable = "objects"

type memdbStore struct{ db *memdb.MemDB }

func newMemdbStore(b *testing.B, secondary bool) store {
	indexes := map[string]*memdb.IndexSchema{
		"id": {Name: "id", Unique: true, Indexer: &memdb.UintFieldIndex{Field: "ID"}},
	}
	if secondary {
		indexes["name"] = &memdb.IndexSchema{Name: "name", Indexer: &memdb.StringFieldIndex{Field: "Name"}}
	}
	db, err := memdb.NewMemDB(&memdb.DBSchema{Tables: map[string]*memdb.TableSchema{
		memdbTable: {Name: memdbTable, Indexes: indexes},
	}})
	if err != nil {
		b.Fatal(err)
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

func (s *memdbStore) insertAbort(objs []*object) {
	txn := s.db.Txn(true)
	for _, o := range objs {
		if err := txn.Insert(memdbTable, o); err != nil {
			panic(err)
		}
	}
	txn.Abort()
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

func (s *memdbStore) iterate() int {
	it, err := s.db.Txn(false).Get(memdbTable, "id")
	if err != nil {
		panic(err)
	}
	n := 0
	for o := it.Next(); o != nil; o = it.Next() {
		n++
	}
	return n
}

// --- raw go-immutable-radix/v2 ---

// iradixStore is the floor: one tree per index, keys encoded as statedb's
// index package encodes them, no revisions, no watch channels, no checks.
// The secondary index is a second tree keyed by name followed by the primary
// key, so that objects sharing a name get distinct entries.
type iradixStore struct {
	primary   *iradix.Tree[*object]
	secondary *iradix.Tree[*object] // nil without a secondary index
}

func newIradixStore(b *testing.B, secondary bool) store {
	s := &iradixStore{primary: iradix.New[*object]()}
	if secondary {
		s.secondary = iradix.New[*object]()
	}
	return s
}

func secondaryKey(o *object) []byte {
	return append(index.String(o.Name), index.Uint64(o.ID)...)
}

func (s *iradixStore) write(objs []*object) {
	txn := s.primary.Txn()
	for _, o := range objs {
		txn.Insert(index.Uint64(o.ID), o)
	}
	if s.secondary != nil {
		stxn := s.secondary.Txn()
		for _, o := range objs {
			stxn.Insert(secondaryKey(o), o)
		}
		s.secondary = stxn.Commit()
	}
	s.primary = txn.Commit()
}

func (s *iradixStore) insertAbort(objs []*object) {
	txn := s.primary.Txn()
	for _, o := range objs {
		txn.Insert(index.Uint64(o.ID), o)
	}
	// Dropping the transaction is the tree's abort.
}

func (s *iradixStore) lookup(ids []uint64) int {
	root := s.primary.Root()
	n := 0
	for _, id := range ids {
		if _, ok := root.Get(index.Uint64(id)); ok {
			n++
		}
	}
	return n
}

func (s *iradixStore) iterate() int {
	it := s.primary.Root().Iterator()
	n := 0
	for _, _, ok := it.Next(); ok; _, _, ok = it.Next() {
		n++
	}
	return n
}

// --- objects ---

// newObjects returns n objects with IDs 0..n-1; ten objects share each name,
// so a name index is not unique.
func newObjects(n int) []*object {
	objs := make([]*object, n)
	for i := range objs {
		objs[i] = &object{ID: uint64(i), Name: fmt.Sprintf("name-%04d", i/10), Value: i}
	}
	return objs
}
