package cilium

import (
	"testing"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/statedb"
)

// The steadystate side: its statedb, used as a library (no hive), with its
// default (no-op) metrics. The shapes add their methods to ssDB in their
// own files, beside the cilium side's.

// ssID is steadystate's primary index of object.
var ssID = statedb.Index[*object, uint64]{
	Name:       "id",
	FromObject: func(o *object) index.KeySet { return index.NewKeySet(index.Uint64(o.ID)) },
	FromKey:    index.Uint64,
	Unique:     true,
}

// ssDB is a steadystate database with tables of object.
type ssDB struct {
	db     *statedb.DB
	tables []statedb.RWTable[*object]
}

// newSSDB returns a database with one table per name.
func newSSDB(tb testing.TB, names ...string) *ssDB {
	return newSSDBWith(tb, nil, names...)
}

// newSSDBWith is newSSDB with options for statedb.New.
func newSSDBWith(tb testing.TB, opts []statedb.Option, names ...string) *ssDB {
	s := &ssDB{db: statedb.New(opts...)}
	for _, name := range names {
		tbl, err := statedb.NewTable(s.db, name, ssID)
		if err != nil {
			tb.Fatal(err)
		}
		s.tables = append(s.tables, tbl)
	}
	return s
}

// fill inserts an object for each id into table t and commits.
func (s *ssDB) fill(t int, ids []uint64) {
	tbl := s.tables[t]
	wtxn := s.db.WriteTxn(tbl)
	for _, id := range ids {
		_, _, err := tbl.Insert(wtxn, &object{ID: id})
		must(err)
	}
	wtxn.Commit()
}
