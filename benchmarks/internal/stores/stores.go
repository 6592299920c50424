// Package stores puts steadystate's statedb and its peers (cilium/statedb,
// go-memdb, the raw go-immutable-radix/v2 tree, a plain Go map) behind one
// small interface, so that every benchmark runs the same workload on each
// of them.
//
// Each method is one transaction (or one snapshot), so the cost of the
// interface call is spread over the objects it handles. Keys are encoded as
// statedb's index package encodes them, also for the raw tree: that is the
// floor statedb's design adds cost to.
package stores

import (
	"fmt"

	cstatedb "github.com/cilium/statedb"
	cindex "github.com/cilium/statedb/index"
	iradix "github.com/hashicorp/go-immutable-radix/v2"
	memdb "github.com/hashicorp/go-memdb"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/statedb"
)

// Object is what every implementation stores, by pointer.
type Object struct {
	ID    uint64
	Name  string
	Value int
}

// Store is one implementation under test.
type Store interface {
	// Write inserts or replaces objs in one committed transaction.
	Write(objs []*Object)
	// Lookup gets each id by primary key from one snapshot and returns how
	// many were found.
	Lookup(ids []uint64) int
}

// Database is a Store with transactions and ordered snapshots: every
// implementation but the plain map.
type Database interface {
	Store
	// InsertAbort inserts objs in one transaction and aborts it, so the
	// store stays as it was.
	InsertAbort(objs []*Object)
	// Iterate walks every object of one snapshot in primary key order and
	// returns how many there were.
	Iterate() int
}

// Impl names an implementation and makes instances of it; with secondary,
// the table also has a non-unique index on Name.
type Impl struct {
	Name string
	New  func(secondary bool) (Database, error)
}

// Databases are the implementations with transactions, in the order they
// are reported.
var Databases = []Impl{
	{"statedb", NewStatedb},
	{"cilium", NewCilium},
	{"memdb", NewMemdb},
	{"iradix", NewIradix},
}

// --- steadystate statedb ---

var (
	// IDIndex is statedb's primary index of Object.
	IDIndex = statedb.Index[*Object, uint64]{
		Name:       "id",
		FromObject: func(o *Object) index.KeySet { return index.NewKeySet(index.Uint64(o.ID)) },
		FromKey:    index.Uint64,
		Unique:     true,
	}
	nameIndex = statedb.Index[*Object, string]{
		Name:       "name",
		FromObject: func(o *Object) index.KeySet { return index.NewKeySet(index.String(o.Name)) },
		FromKey:    index.String,
	}
)

type statedbStore struct {
	db  *statedb.DB
	tbl statedb.RWTable[*Object]
}

// NewStatedb returns a statedb table.
func NewStatedb(secondary bool) (Database, error) {
	db := statedb.New()
	var idx []statedb.Indexer[*Object]
	if secondary {
		idx = append(idx, nameIndex)
	}
	tbl, err := statedb.NewTable(db, "objects", IDIndex, idx...)
	if err != nil {
		return nil, err
	}
	return &statedbStore{db: db, tbl: tbl}, nil
}

func (s *statedbStore) insert(objs []*Object) statedb.WriteTxn {
	wtxn := s.db.WriteTxn(s.tbl)
	for _, o := range objs {
		if _, _, err := s.tbl.Insert(wtxn, o); err != nil {
			panic(err)
		}
	}
	return wtxn
}

func (s *statedbStore) Write(objs []*Object)       { s.insert(objs).Commit() }
func (s *statedbStore) InsertAbort(objs []*Object) { s.insert(objs).Abort() }

func (s *statedbStore) Lookup(ids []uint64) int {
	txn := s.db.ReadTxn()
	n := 0
	for _, id := range ids {
		if _, _, ok := s.tbl.Get(txn, IDIndex.Query(id)); ok {
			n++
		}
	}
	return n
}

func (s *statedbStore) Iterate() int {
	n := 0
	for range s.tbl.All(s.db.ReadTxn()) {
		n++
	}
	return n
}

// --- cilium/statedb ---

// TableHeader and TableRow make Object storable in cilium's tables (their
// script commands print tables with them).
func (o *Object) TableHeader() []string { return []string{"ID", "Name", "Value"} }
func (o *Object) TableRow() []string {
	return []string{fmt.Sprint(o.ID), o.Name, fmt.Sprint(o.Value)}
}

var (
	ciIDIndex = cstatedb.Index[*Object, uint64]{
		Name:       "id",
		FromObject: func(o *Object) cindex.KeySet { return cindex.NewKeySet(cindex.Uint64(o.ID)) },
		FromKey:    cindex.Uint64,
		Unique:     true,
	}
	ciNameIndex = cstatedb.Index[*Object, string]{
		Name:       "name",
		FromObject: func(o *Object) cindex.KeySet { return cindex.NewKeySet(cindex.String(o.Name)) },
		FromKey:    cindex.String,
	}
)

type ciliumStore struct {
	db  *cstatedb.DB
	tbl cstatedb.RWTable[*Object]
}

// NewCilium returns a cilium/statedb table with its default (no-op)
// metrics. The database is not started: its graveyard worker has nothing
// to do without deletes, and it would be a goroutine to stop.
func NewCilium(secondary bool) (Database, error) {
	db := cstatedb.New()
	var idx []cstatedb.Indexer[*Object]
	if secondary {
		idx = append(idx, ciNameIndex)
	}
	tbl, err := cstatedb.NewTable(db, "objects", ciIDIndex, idx...)
	if err != nil {
		return nil, err
	}
	return &ciliumStore{db: db, tbl: tbl}, nil
}

func (s *ciliumStore) insert(objs []*Object) cstatedb.WriteTxn {
	wtxn := s.db.WriteTxn(s.tbl)
	for _, o := range objs {
		if _, _, err := s.tbl.Insert(wtxn, o); err != nil {
			panic(err)
		}
	}
	return wtxn
}

func (s *ciliumStore) Write(objs []*Object)       { s.insert(objs).Commit() }
func (s *ciliumStore) InsertAbort(objs []*Object) { s.insert(objs).Abort() }

func (s *ciliumStore) Lookup(ids []uint64) int {
	txn := s.db.ReadTxn()
	n := 0
	for _, id := range ids {
		if _, _, ok := s.tbl.Get(txn, ciIDIndex.Query(id)); ok {
			n++
		}
	}
	return n
}

func (s *ciliumStore) Iterate() int {
	n := 0
	for range s.tbl.All(s.db.ReadTxn()) {
		n++
	}
	return n
}

// --- hashicorp/go-memdb ---

const memdbTable = "objects"

type memdbStore struct{ db *memdb.MemDB }

// NewMemdb returns a go-memdb table.
func NewMemdb(secondary bool) (Database, error) {
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
		return nil, err
	}
	return &memdbStore{db: db}, nil
}

func (s *memdbStore) insert(objs []*Object) *memdb.Txn {
	txn := s.db.Txn(true)
	for _, o := range objs {
		if err := txn.Insert(memdbTable, o); err != nil {
			panic(err)
		}
	}
	return txn
}

func (s *memdbStore) Write(objs []*Object)       { s.insert(objs).Commit() }
func (s *memdbStore) InsertAbort(objs []*Object) { s.insert(objs).Abort() }

func (s *memdbStore) Lookup(ids []uint64) int {
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

func (s *memdbStore) Iterate() int {
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

// iradixStore is the floor: one tree per index, no revisions, no watch
// channels, no checks. The secondary index is a second tree keyed by name
// followed by the primary key, so that objects sharing a name get distinct
// entries.
type iradixStore struct {
	primary   *iradix.Tree[*Object]
	secondary *iradix.Tree[*Object] // nil without a secondary index
}

// NewIradix returns raw go-immutable-radix/v2 trees.
func NewIradix(secondary bool) (Database, error) {
	s := &iradixStore{primary: iradix.New[*Object]()}
	if secondary {
		s.secondary = iradix.New[*Object]()
	}
	return s, nil
}

func secondaryKey(o *Object) []byte {
	return append(index.String(o.Name), index.Uint64(o.ID)...)
}

func (s *iradixStore) Write(objs []*Object) {
	txn := s.insert(objs)
	if s.secondary != nil {
		stxn := s.secondary.Txn()
		for _, o := range objs {
			stxn.Insert(secondaryKey(o), o)
		}
		s.secondary = stxn.Commit()
	}
	s.primary = txn.Commit()
}

func (s *iradixStore) insert(objs []*Object) *iradix.Txn[*Object] {
	txn := s.primary.Txn()
	for _, o := range objs {
		txn.Insert(index.Uint64(o.ID), o)
	}
	return txn
}

// InsertAbort drops the transaction, which is the tree's abort.
func (s *iradixStore) InsertAbort(objs []*Object) { s.insert(objs) }

func (s *iradixStore) Lookup(ids []uint64) int {
	root := s.primary.Root()
	n := 0
	for _, id := range ids {
		if _, ok := root.Get(index.Uint64(id)); ok {
			n++
		}
	}
	return n
}

func (s *iradixStore) Iterate() int {
	it := s.primary.Root().Iterator()
	n := 0
	for _, _, ok := it.Next(); ok; _, _, ok = it.Next() {
		n++
	}
	return n
}

// --- plain Go map ---

// Map is a plain Go map: not a database (no snapshots, no transactions), it
// bounds what is possible.
type Map struct{ m map[uint64]*Object }

// NewMap returns an empty Map.
func NewMap() *Map { return &Map{m: map[uint64]*Object{}} }

// Write implements Store.
func (s *Map) Write(objs []*Object) {
	for _, o := range objs {
		s.m[o.ID] = o
	}
}

// Lookup implements Store.
func (s *Map) Lookup(ids []uint64) int {
	n := 0
	for _, id := range ids {
		if _, ok := s.m[id]; ok {
			n++
		}
	}
	return n
}

// Must returns s, or panics with err: for benchmark set-up, where a failure
// to create a store is a bug.
func Must(s Database, err error) Database {
	if err != nil {
		panic(fmt.Sprintf("creating a store: %v", err))
	}
	return s
}
