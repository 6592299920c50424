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
		return false, closedWatch()
	}
	if e.init == nil {
		return true, closedWatch() // no initializer was ever registered
	}
	return len(e.init.pending) == 0, e.init.watch
}

// PendingInitializers returns the names of the initializers that are not
// done yet.
func (t *table[Obj]) PendingInitializers(txn ReadTxn) []string {
	if e := txn.tableEntry(t); e != nil && e.init != nil {
		names := make([]string, len(e.init.pending))
		for i, ini := range e.init.pending {
			names[i] = ini.name
		}
		return names
	}
	return nil
}

// The reads below walk the trees with radix's walks (All, Prefix,
// LowerBound, Minimum). A table that did not exist yet in txn's snapshot
// has no entry there; its roots are then nil, which radix reads as an empty
// tree whose watch channels are closed.

// snapshotRoot returns the root of index pos in txn, frozen for iterating
// and watching (see tableEntry.snapshot), and the table's entry; both nil
// when the table is not in txn.
func (t *table[Obj]) snapshotRoot(txn ReadTxn, pos int) (*tableEntry, *treeNode) {
	e := txn.tableEntry(t)
	if e == nil {
		return nil, nil
	}
	return e, e.snapshot(pos)
}

func (t *table[Obj]) Get(txn ReadTxn, q Query[Obj]) (obj Obj, rev Revision, found bool) {
	e := txn.tableEntry(t)
	if e == nil {
		return
	}
	pos := t.indexPos(q.index)
	var o object
	switch {
	case t.plain[pos]:
		o, found = e.root(pos).Get(q.key)
	case t.lpm[pos]:
		var buf lpmKeyBuf
		o, found = lpmFirst(e.root(pos), q.keyIn(&buf))
	default:
		_, o, found = e.snapshot(pos).Prefix(nonUniqueExact(q.key)).Minimum()
	}
	if !found {
		return
	}
	return t.obj(o), o.revision, true
}

func (t *table[Obj]) GetWatch(txn ReadTxn, q Query[Obj]) (obj Obj, rev Revision, watch <-chan struct{}, found bool) {
	pos := t.indexPos(q.index)
	if !t.tracked[pos] {
		watch = txn.tableEntry(t).watchAll()
		obj, rev, found = t.Get(txn, q)
		return
	}
	_, root := t.snapshotRoot(txn, pos)
	var o object
	switch {
	case t.plain[pos]:
		watch, o, found = root.GetWatch(q.key)
	case t.lpm[pos]:
		var group *treeNode
		var buf lpmKeyBuf
		group, watch = lpmGet(root, q.keyIn(&buf), true)
		_, o, found = group.Minimum()
	default:
		var sub *treeNode
		sub, watch = root.PrefixWatch(nonUniqueExact(q.key))
		_, o, found = sub.Minimum()
	}
	if !found {
		return obj, 0, watch, false
	}
	return t.obj(o), o.revision, watch, true
}

func (t *table[Obj]) List(txn ReadTxn, q Query[Obj]) iter.Seq2[Obj, Revision] {
	seq, _ := t.list(txn, q, false)
	return seq
}

func (t *table[Obj]) ListWatch(txn ReadTxn, q Query[Obj]) (iter.Seq2[Obj, Revision], <-chan struct{}) {
	return t.list(txn, q, true)
}

func (t *table[Obj]) list(txn ReadTxn, q Query[Obj], watch bool) (iter.Seq2[Obj, Revision], <-chan struct{}) {
	pos := t.indexPos(q.index)
	if t.lpm[pos] {
		_, root := t.snapshotRoot(txn, pos)
		var buf lpmKeyBuf
		group, ch := lpmGet(root, q.keyIn(&buf), watch)
		return t.all(group), ch
	}
	if t.plain[pos] {
		// At most one object: a lookup, not a walk.
		var ch <-chan struct{}
		var o object
		var ok bool
		if watch && t.tracked[pos] {
			_, root := t.snapshotRoot(txn, pos)
			ch, o, ok = root.GetWatch(q.key)
		} else {
			e := txn.tableEntry(t)
			if e != nil {
				o, ok = e.root(pos).Get(q.key)
			}
			if watch {
				ch = e.watchAll()
			}
		}
		return func(yield func(Obj, Revision) bool) {
			if ok {
				yield(t.obj(o), o.revision)
			}
		}, ch
	}
	_, root := t.snapshotRoot(txn, pos)
	if watch {
		sub, ch := root.PrefixWatch(nonUniqueExact(q.key))
		return t.all(sub), ch
	}
	return t.all(root.Prefix(nonUniqueExact(q.key))), nil
}

func (t *table[Obj]) Prefix(txn ReadTxn, q Query[Obj]) iter.Seq2[Obj, Revision] {
	seq, _ := t.prefix(txn, q, false)
	return seq
}

func (t *table[Obj]) PrefixWatch(txn ReadTxn, q Query[Obj]) (iter.Seq2[Obj, Revision], <-chan struct{}) {
	return t.prefix(txn, q, true)
}

func (t *table[Obj]) prefix(txn ReadTxn, q Query[Obj], watch bool) (iter.Seq2[Obj, Revision], <-chan struct{}) {
	pos := t.indexPos(q.index)
	e, root := t.snapshotRoot(txn, pos)
	key := q.Key()
	if !t.plain[pos] {
		key = escapeKey(nil, key)
	}
	switch {
	case !watch:
		return t.all(root.Prefix(key)), nil
	case t.tracked[pos]:
		sub, ch := root.PrefixWatch(key)
		return t.all(sub), ch
	default:
		return t.all(root.Prefix(key)), e.watchAll()
	}
}

func (t *table[Obj]) LowerBound(txn ReadTxn, q Query[Obj]) iter.Seq2[Obj, Revision] {
	seq, _ := t.lowerBound(txn, q, false)
	return seq
}

func (t *table[Obj]) LowerBoundWatch(txn ReadTxn, q Query[Obj]) (iter.Seq2[Obj, Revision], <-chan struct{}) {
	return t.lowerBound(txn, q, true)
}

// lowerBound is LowerBound and, with watch, LowerBoundWatch. A read
// without watch asks for no channel: channels are made lazily, on the
// first read that wants one, and a commit has one less to close.
func (t *table[Obj]) lowerBound(txn ReadTxn, q Query[Obj], watch bool) (iter.Seq2[Obj, Revision], <-chan struct{}) {
	pos := t.indexPos(q.index)
	e, root := t.snapshotRoot(txn, pos)
	key := q.Key()
	if !t.plain[pos] {
		// Tree keys of a non-unique index sort by secondary key first
		// (see appendNonUnique), so seeking its encoding is exact. An
		// object is yielded once per key, like Prefix does.
		key = escapeKey(nil, key)
	}
	var ch <-chan struct{}
	if watch {
		ch = e.watchAll()
	}
	return func(yield func(Obj, Revision) bool) {
		root.LowerBound(key, func(_ []byte, o object) bool { return yield(t.obj(o), o.revision) })
	}, ch
}

func (t *table[Obj]) Last(txn ReadTxn, q Query[Obj]) (obj Obj, rev Revision, found bool) {
	obj, rev, _, found = t.last(txn, q, false)
	return
}

func (t *table[Obj]) LastWatch(txn ReadTxn, q Query[Obj]) (obj Obj, rev Revision, watch <-chan struct{}, found bool) {
	return t.last(txn, q, true)
}

// last is Last and, with watch, LastWatch: the greatest entry under the
// query key taken as a prefix, like Prefix's last object.
func (t *table[Obj]) last(txn ReadTxn, q Query[Obj], watch bool) (obj Obj, rev Revision, ch <-chan struct{}, found bool) {
	pos := t.indexPos(q.index)
	e, root := t.snapshotRoot(txn, pos)
	key := q.Key()
	if !t.plain[pos] {
		key = escapeKey(nil, key)
	}
	var sub *treeNode
	switch {
	case !watch:
		sub = root.Prefix(key)
	case t.tracked[pos]:
		sub, ch = root.PrefixWatch(key)
	default:
		sub, ch = root.Prefix(key), e.watchAll()
	}
	_, o, found := sub.Maximum()
	if !found {
		return obj, 0, ch, false
	}
	return t.obj(o), o.revision, ch, true
}

func (t *table[Obj]) ReverseLowerBound(txn ReadTxn, q Query[Obj]) iter.Seq2[Obj, Revision] {
	seq, _ := t.reverseLowerBound(txn, q, false)
	return seq
}

func (t *table[Obj]) ReverseLowerBoundWatch(txn ReadTxn, q Query[Obj]) (iter.Seq2[Obj, Revision], <-chan struct{}) {
	return t.reverseLowerBound(txn, q, true)
}

// reverseLowerBound is ReverseLowerBound and, with watch,
// ReverseLowerBoundWatch.
func (t *table[Obj]) reverseLowerBound(txn ReadTxn, q Query[Obj], watch bool) (iter.Seq2[Obj, Revision], <-chan struct{}) {
	pos := t.indexPos(q.index)
	e, root := t.snapshotRoot(txn, pos)
	key := q.Key()
	if !t.plain[pos] {
		// The tree keys of the secondary keys <= k are exactly those below
		// escape(k) 0x00 0x01, which is no tree key itself: the terminator
		// 0x00 0x00 sorts below it, and a longer secondary key that
		// continues with 0x00 (escaped 0x00 0x01) is longer than it.
		key = append(escapeKey(make([]byte, 0, len(key)+2), key), 0, 1)
	}
	var ch <-chan struct{}
	if watch {
		ch = e.watchAll()
	}
	return func(yield func(Obj, Revision) bool) {
		root.ReverseLowerBound(key, func(_ []byte, o object) bool { return yield(t.obj(o), o.revision) })
	}, ch
}

func (t *table[Obj]) All(txn ReadTxn) iter.Seq2[Obj, Revision] {
	_, root := t.snapshotRoot(txn, 0)
	return t.all(root)
}

func (t *table[Obj]) AllWatch(txn ReadTxn) (iter.Seq2[Obj, Revision], <-chan struct{}) {
	e, root := t.snapshotRoot(txn, 0)
	return t.all(root), e.watchAll()
}

// all yields the objects of the subtree of root (nil: none) in key order.
func (t *table[Obj]) all(root *treeNode) iter.Seq2[Obj, Revision] {
	direct := t.direct
	return func(yield func(Obj, Revision) bool) {
		root.All(func(_ []byte, o object) bool { return yield(loadObject[Obj](direct, o), o.revision) })
	}
}

// appendNonUnique appends to dst the tree key of an object in a non-unique
// index: the secondary key escaped and terminated, then the primary key (so
// that objects sharing a secondary key get distinct entries). The escaping (0x00
// becomes 0x00 0x01) and the terminator (0x00 0x00) keep the order of
// (secondary, primary) pairs: a secondary key sorts before every longer key
// it is a prefix of, whatever the primary keys. So Prefix, List and
// LowerBound work on the encoded form directly:
//
//	exact secondary key k:      prefix escape(k) 0x00 0x00
//	secondary keys starting k:  prefix escape(k)
//	secondary keys >= k:        lower bound escape(k)
func appendNonUnique(dst []byte, secondary, primary index.Key) []byte {
	dst = escapeKey(dst, secondary)
	dst = append(dst, 0, 0)
	return append(dst, primary...)
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
