package statedb

import (
	"fmt"
	"iter"
	"strconv"

	"github.com/steadystate/steadystate/index"
)

// anyTable is the untyped access to a table that the HTTP API needs: every
// table of this package implements it.
type anyTable interface {
	info(txn ReadTxn) TableInfo
	anyQuery(txn ReadTxn, op QueryOp, indexName, key string) (iter.Seq2[any, Revision], error)
	anyChanges(txn WriteTxn) (anyChangeIterator, error)
	anyAll(txn ReadTxn) iter.Seq2[any, Revision]
}

type anyChangeIterator interface {
	next(txn ReadTxn) (iter.Seq2[Change[any], Revision], <-chan struct{})
	Close()
}

// queryOpNames lists the operations anyQuery serves, for its error.
const queryOpNames = "get, list, prefix, lowerbound, reverse-lowerbound, last, lpm"

func (t *table[Obj]) info(txn ReadTxn) TableInfo {
	ok, _ := t.Initialized(txn)
	info := TableInfo{
		Name:                t.name,
		Objects:             t.NumObjects(txn),
		Revision:            t.Revision(txn),
		Indexes:             t.Indexes(),
		Initialized:         ok,
		PendingInitializers: t.PendingInitializers(txn),
		ChangeIterators:     int(t.trackers.count.Load()),
		KeyFormats:          t.keyFormats(),
	}
	if e := txn.tableEntry(t); e != nil {
		info.GraveyardObjects = e.graveyardLen()
	}
	return info
}

// anyQuery runs a lookup given as text: the index by name and the key parsed
// with the index's FromString (PrefixFromString for prefix and last).
func (t *table[Obj]) anyQuery(txn ReadTxn, op QueryOp, indexName, key string) (iter.Seq2[any, Revision], error) {
	pos := -1
	for i, n := range t.Indexes() {
		if n == indexName {
			pos = i
		}
	}
	if pos < 0 {
		return nil, tableError(t.name, fmt.Errorf("%w: no index %q (indexes: %v)", ErrBadQuery, indexName, t.Indexes()))
	}
	var k index.Key
	switch {
	case op == QueryLPM && !t.lpm[pos]:
		return nil, tableError(t.name, fmt.Errorf("%w: operation %q needs an LPM index, and index %q is not one", ErrBadQuery, op, indexName))
	case op == QueryLast && key == "":
		// The last object of the whole index.
	case pos == t.revisionIndex():
		rev, err := strconv.ParseUint(key, 10, 64)
		if err != nil {
			return nil, tableError(t.name, fmt.Errorf("%w: index %q: bad revision %q: %v (keys of index %q: %s)", ErrBadQuery, indexName, key, err, indexName, revisionKeyFormat))
		}
		k = index.Uint64(rev)
	default:
		var err error
		if k, err = t.parseQueryKey(op, pos, key); err != nil {
			return nil, tableError(t.name, err) // wraps ErrBadQuery
		}
	}
	q := Query[Obj]{index: indexName, key: k}
	var seq iter.Seq2[Obj, Revision]
	switch op {
	case QueryGet:
		obj, rev, found := t.Get(txn, q)
		seq = func(yield func(Obj, Revision) bool) {
			if found {
				yield(obj, rev)
			}
		}
	case QueryList, QueryLPM, "":
		// On an LPM index, List is the longest-prefix match.
		seq = t.List(txn, q)
	case QueryPrefix:
		seq = t.Prefix(txn, q)
	case QueryLowerBound:
		seq = t.LowerBound(txn, q)
	case QueryReverseLowerBound:
		seq = t.ReverseLowerBound(txn, q)
	case QueryLast:
		obj, rev, found := t.Last(txn, q)
		seq = func(yield func(Obj, Revision) bool) {
			if found {
				yield(obj, rev)
			}
		}
	default:
		return nil, tableError(t.name, fmt.Errorf("%w: unknown operation %q (%s)", ErrBadQuery, op, queryOpNames))
	}
	return func(yield func(any, Revision) bool) {
		for obj, rev := range seq {
			if !yield(obj, rev) {
				return
			}
		}
	}, nil
}

func (t *table[Obj]) anyAll(txn ReadTxn) iter.Seq2[any, Revision] {
	return func(yield func(any, Revision) bool) {
		for obj, rev := range t.All(txn) {
			if !yield(obj, rev) {
				return
			}
		}
	}
}

func (t *table[Obj]) anyChanges(txn WriteTxn) (anyChangeIterator, error) {
	it, err := t.Changes(txn)
	if err != nil {
		return nil, err
	}
	return anyChanges[Obj]{it}, nil
}

type anyChanges[Obj any] struct{ ChangeIterator[Obj] }

func (a anyChanges[Obj]) next(txn ReadTxn) (iter.Seq2[Change[any], Revision], <-chan struct{}) {
	seq, watch := a.Next(txn)
	return func(yield func(Change[any], Revision) bool) {
		for c, rev := range seq {
			if !yield(Change[any]{Object: c.Object, Revision: c.Revision, Deleted: c.Deleted}, rev) {
				return
			}
		}
	}, watch
}

// TableByName returns the table with the given name, or false.
func (db *DB) TableByName(name string) (TableMeta, bool) {
	db.mu.Lock()
	defer db.mu.Unlock()
	for _, t := range db.tables {
		if t.name == name {
			return t.table, true
		}
	}
	return nil, false
}

// TableInfos describes every table in the snapshot txn, in creation order.
func (db *DB) TableInfos(txn ReadTxn) []TableInfo {
	var out []TableInfo
	for _, t := range db.Tables() {
		out = append(out, t.(anyTable).info(txn))
	}
	return out
}
