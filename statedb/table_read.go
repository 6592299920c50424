package statedb

import (
	"bytes"
	"encoding/binary"
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
		return append([]string(nil), e.initPending...)
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
	for obj, rev := range t.nonUnique(e.snapshot(pos), q.key, true) {
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
		watch = e.watchAll
		obj, rev, found = t.Get(txn, q)
		return
	}
	if t.unique[pos] {
		ch, o, ok := e.root(pos).GetWatch(q.key)
		if !ok {
			return obj, 0, ch, false
		}
		return o.data.(Obj), o.revision, ch, true
	}
	root := e.snapshot(pos)
	it := root.Iterator()
	watch = it.SeekPrefixWatch(q.key)
	for obj, rev := range t.nonUnique(root, q.key, true) {
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
			ch, o, ok = e.root(pos).GetWatch(q.key)
		} else {
			o, ok = e.root(pos).Get(q.key)
			ch = e.watchAll
		}
		if !ok {
			return emptySeq[Obj], ch
		}
		return func(yield func(Obj, Revision) bool) { yield(o.data.(Obj), o.revision) }, ch
	}
	root := e.snapshot(pos)
	var ch <-chan struct{}
	if watch {
		ch = root.Iterator().SeekPrefixWatch(q.key)
	}
	return t.nonUnique(root, q.key, true), ch
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
	var ch <-chan struct{}
	if watch {
		if t.tracked[pos] {
			ch = root.Iterator().SeekPrefixWatch(q.key)
		} else {
			ch = e.watchAll
		}
	}
	if !t.unique[pos] {
		return t.nonUnique(root, q.key, false), ch
	}
	key := q.key
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
	unique := t.unique[pos]
	return func(yield func(Obj, Revision) bool) {
		it := root.Iterator()
		it.SeekLowerBound(key)
		for k, o, ok := it.Next(); ok; k, o, ok = it.Next() {
			// A non-unique index holds each object under every one of its
			// keys; yield it once per key like Prefix does.
			if !unique && len(k) < 2 {
				continue
			}
			if !yield(o.data.(Obj), o.revision) {
				return
			}
		}
	}, e.watchAll
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
	}, e.watchAll
}

// nonUnique iterates a non-unique index under key. Its tree keys are
// secondaryKey + primaryKey + uint16(len(secondaryKey)); exact requires the
// secondary key to equal key, otherwise it must merely start with it.
func (t *table[Obj]) nonUnique(root *treeNode, key index.Key, exact bool) iter.Seq2[Obj, Revision] {
	return func(yield func(Obj, Revision) bool) {
		it := root.Iterator()
		it.SeekPrefix(key)
		for k, o, ok := it.Next(); ok; k, o, ok = it.Next() {
			n := secondaryKeyLen(k)
			if exact && n != len(key) || n < len(key) {
				continue
			}
			if !yield(o.data.(Obj), o.revision) {
				return
			}
		}
	}
}

// encodeNonUnique builds the tree key of an object in a non-unique index:
// the secondary key, then the primary key (so that objects sharing a
// secondary key get distinct entries), then the secondary key's length.
func encodeNonUnique(secondary, primary index.Key) []byte {
	k := make([]byte, 0, len(secondary)+len(primary)+2)
	k = append(k, secondary...)
	k = append(k, primary...)
	return binary.BigEndian.AppendUint16(k, uint16(len(secondary)))
}

func secondaryKeyLen(k []byte) int {
	if len(k) < 2 {
		return -1
	}
	return int(binary.BigEndian.Uint16(k[len(k)-2:]))
}

// primaryOfNonUnique extracts the primary key from a non-unique tree key.
func primaryOfNonUnique(k []byte) []byte {
	n := secondaryKeyLen(k)
	return k[n : len(k)-2]
}

func emptySeq[Obj any](func(Obj, Revision) bool) {}

var _ = bytes.Equal
