package statedb

import (
	"bytes"
	"iter"

	"github.com/steadystate/steadystate/index"
)

// Reads never lock: they use the tree roots of the snapshot they are given.

func (t *table[Obj]) Revision(txn ReadTxn) Revision {
	if e := txn.tableEntry(t); e != nil {
		return e.revision
	}
	return 0
}

func (t *table[Obj]) NumObjects(txn ReadTxn) int {
	if e := txn.tableEntry(t); e != nil {
		return e.numObjects()
	}
	return 0
}

func (t *table[Obj]) Initialized(txn ReadTxn) (bool, <-chan struct{}) {
	e := txn.tableEntry(t)
	if e == nil {
		return false, closedChan
	}
	return len(e.initPending) == 0, e.initWatch
}

// PendingInitializers returns the names of the initializers that are not
// done yet.
func (t *table[Obj]) PendingInitializers(txn ReadTxn) []string {
	if e := txn.tableEntry(t); e != nil {
		names := make([]string, len(e.initPending))
		for i, ini := range e.initPending {
			names[i] = ini.name
		}
		return names
	}
	return nil
}

func (t *table[Obj]) Get(txn ReadTxn, q Query[Obj]) (obj Obj, rev Revision, found bool) {
	e := txn.tableEntry(t)
	if e == nil {
		return
	}
	pos := t.indexPos(q.index)
	if t.unique[pos] {
		o, ok := e.root(pos).Get(q.key)
		if !ok {
			return
		}
		return o.data.(Obj), o.revision, true
	}
	for obj, rev := range t.nonUnique(e.snapshot(pos), nonUniqueExact(q.key)) {
		return obj, rev, true
	}
	return
}

func (t *table[Obj]) GetWatch(txn ReadTxn, q Query[Obj]) (obj Obj, rev Revision, watch <-chan struct{}, found bool) {
	e := txn.tableEntry(t)
	if e == nil {
		return obj, 0, closedChan, false
	}
	pos := t.indexPos(q.index)
	if !t.tracked[pos] {
		watch = e.watchAll()
		obj, rev, found = t.Get(txn, q)
		return
	}
	if t.unique[pos] {
		ch, o, ok := e.snapshot(pos).GetWatch(q.key)
		if !ok {
			return obj, 0, ch, false
		}
		return o.data.(Obj), o.revision, ch, true
	}
	root := e.snapshot(pos)
	exact := nonUniqueExact(q.key)
	watch = root.Iterator().SeekPrefixWatch(exact)
	for obj, rev := range t.nonUnique(root, exact) {
		return obj, rev, watch, true
	}
	return obj, 0, watch, false
}

func (t *table[Obj]) List(txn ReadTxn, q Query[Obj]) iter.Seq2[Obj, Revision] {
	seq, _ := t.list(txn, q, false)
	return seq
}

func (t *table[Obj]) ListWatch(txn ReadTxn, q Query[Obj]) (iter.Seq2[Obj, Revision], <-chan struct{}) {
	return t.list(txn, q, true)
}

func (t *table[Obj]) list(txn ReadTxn, q Query[Obj], watch bool) (iter.Seq2[Obj, Revision], <-chan struct{}) {
	e := txn.tableEntry(t)
	if e == nil {
		return emptySeq[Obj], closedChan
	}
	pos := t.indexPos(q.index)
	if t.unique[pos] {
		var ch <-chan struct{}
		var o object
		var ok bool
		if watch && t.tracked[pos] {
			ch, o, ok = e.snapshot(pos).GetWatch(q.key)
		} else {
			o, ok = e.root(pos).Get(q.key)
			ch = e.watchAll()
		}
		if !ok {
			return emptySeq[Obj], ch
		}
		return func(yield func(Obj, Revision) bool) { yield(o.data.(Obj), o.revision) }, ch
	}
	root := e.snapshot(pos)
	exact := nonUniqueExact(q.key)
	var ch <-chan struct{}
	if watch {
		ch = root.Iterator().SeekPrefixWatch(exact)
	}
	return t.nonUnique(root, exact), ch
}

func (t *table[Obj]) Prefix(txn ReadTxn, q Query[Obj]) iter.Seq2[Obj, Revision] {
	seq, _ := t.prefix(txn, q, false)
	return seq
}

func (t *table[Obj]) PrefixWatch(txn ReadTxn, q Query[Obj]) (iter.Seq2[Obj, Revision], <-chan struct{}) {
	return t.prefix(txn, q, true)
}

func (t *table[Obj]) prefix(txn ReadTxn, q Query[Obj], watch bool) (iter.Seq2[Obj, Revision], <-chan struct{}) {
	e := txn.tableEntry(t)
	if e == nil {
		return emptySeq[Obj], closedChan
	}
	pos := t.indexPos(q.index)
	root := e.snapshot(pos)
	key := q.key
	if !t.unique[pos] {
		key = escapeKey(nil, key)
	}
	var ch <-chan struct{}
	if watch {
		if t.tracked[pos] {
			ch = root.Iterator().SeekPrefixWatch(key)
		} else {
			ch = e.watchAll()
		}
	}
	return func(yield func(Obj, Revision) bool) {
		it := root.Iterator()
		it.SeekPrefix(key)
		for _, o, ok := it.Next(); ok; _, o, ok = it.Next() {
			if !yield(o.data.(Obj), o.revision) {
				return
			}
		}
	}, ch
}

func (t *table[Obj]) LowerBound(txn ReadTxn, q Query[Obj]) iter.Seq2[Obj, Revision] {
	seq, _ := t.LowerBoundWatch(txn, q)
	return seq
}

func (t *table[Obj]) LowerBoundWatch(txn ReadTxn, q Query[Obj]) (iter.Seq2[Obj, Revision], <-chan struct{}) {
	e := txn.tableEntry(t)
	if e == nil {
		return emptySeq[Obj], closedChan
	}
	pos := t.indexPos(q.index)
	root := e.snapshot(pos)
	key := q.key
	if !t.unique[pos] {
		// Tree keys of a non-unique index sort by secondary key first
		// (see encodeNonUnique), so seeking its encoding is exact. An
		// object is yielded once per key, like Prefix does.
		key = escapeKey(nil, key)
	}
	return func(yield func(Obj, Revision) bool) {
		it := root.Iterator()
		it.SeekLowerBound(key)
		for _, o, ok := it.Next(); ok; _, o, ok = it.Next() {
			if !yield(o.data.(Obj), o.revision) {
				return
			}
		}
	}, e.watchAll()
}

func (t *table[Obj]) All(txn ReadTxn) iter.Seq2[Obj, Revision] {
	seq, _ := t.AllWatch(txn)
	return seq
}

func (t *table[Obj]) AllWatch(txn ReadTxn) (iter.Seq2[Obj, Revision], <-chan struct{}) {
	e := txn.tableEntry(t)
	if e == nil {
		return emptySeq[Obj], closedChan
	}
	root := e.snapshot(0)
	return func(yield func(Obj, Revision) bool) {
		it := root.Iterator()
		for _, o, ok := it.Next(); ok; _, o, ok = it.Next() {
			if !yield(o.data.(Obj), o.revision) {
				return
			}
		}
	}, e.watchAll()
}

// nonUnique iterates the entries of a non-unique index under the encoded
// prefix (see nonUniqueExact and escapeKey).
func (t *table[Obj]) nonUnique(root *treeNode, prefix []byte) iter.Seq2[Obj, Revision] {
	return func(yield func(Obj, Revision) bool) {
		it := root.Iterator()
		it.SeekPrefix(prefix)
		for _, o, ok := it.Next(); ok; _, o, ok = it.Next() {
			if !yield(o.data.(Obj), o.revision) {
				return
			}
		}
	}
}

// encodeNonUnique builds the tree key of an object in a non-unique index:
// the secondary key escaped and terminated, then the primary key (so that
// objects sharing a secondary key get distinct entries). The escaping (0x00
// becomes 0x00 0x01) and the terminator (0x00 0x00) keep the order of
// (secondary, primary) pairs: a secondary key sorts before every longer key
// it is a prefix of, whatever the primary keys. So Prefix, List and
// LowerBound work on the encoded form directly:
//
//	exact secondary key k:      prefix escape(k) 0x00 0x00
//	secondary keys starting k:  prefix escape(k)
//	secondary keys >= k:        lower bound escape(k)
func encodeNonUnique(secondary, primary index.Key) []byte {
	k := make([]byte, 0, len(secondary)+len(primary)+4)
	k = escapeKey(k, secondary)
	k = append(k, 0, 0)
	return append(k, primary...)
}

// escapeKey appends key to dst with every 0x00 written as 0x00 0x01.
func escapeKey(dst, key []byte) []byte {
	if bytes.IndexByte(key, 0) < 0 {
		return append(dst, key...)
	}
	for _, b := range key {
		if b == 0 {
			dst = append(dst, 0, 1)
		} else {
			dst = append(dst, b)
		}
	}
	return dst
}

// nonUniqueExact is the tree-key prefix of the entries whose secondary key
// is exactly key.
func nonUniqueExact(key []byte) []byte {
	return append(escapeKey(make([]byte, 0, len(key)+2), key), 0, 0)
}

func emptySeq[Obj any](func(Obj, Revision) bool) {}
