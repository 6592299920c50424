package statedb

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/steadystate/steadystate/index"
)

// Writes go through the table's open tree transactions inside a WriteTxn;
// nothing is visible to readers until Commit.

func (t *table[Obj]) Insert(txn WriteTxn, obj Obj) (old Obj, hadOld bool, err error) {
	return t.insert(txn, obj, false, 0)
}

func (t *table[Obj]) CompareAndSwap(txn WriteTxn, rev Revision, obj Obj) (old Obj, hadOld bool, err error) {
	return t.insert(txn, obj, true, rev)
}

// prepareWrite checks that txn may write the table, returns obj's primary
// key and, with cas, checks that the stored object has revision casRev (op
// names the operation in the error). On a revision mismatch it returns the
// stored object with the error.
func (t *table[Obj]) prepareWrite(txn WriteTxn, obj Obj, cas bool, casRev Revision, op string) (tt *txnTable, pk index.Key, cur Obj, err error) {
	if tt, err = txnTableOf(txn, t.tableMeta); err != nil {
		return nil, nil, cur, err
	}
	if pk, err = t.primaryKey(obj); err != nil {
		return nil, nil, cur, err
	}
	if cas {
		stored, found := tt.txn(0).Get(pk)
		if !found {
			return nil, nil, cur, tableError(t.name, fmt.Errorf("%w: %s of %q", ErrObjectNotFound, op, pk))
		}
		if stored.revision != casRev {
			return nil, nil, t.obj(stored), tableError(t.name, fmt.Errorf("%w: %s of %q at revision %d, stored revision is %d", ErrRevisionNotEqual, op, pk, casRev, stored.revision))
		}
	}
	return tt, pk, cur, nil
}

func (t *table[Obj]) insert(txn WriteTxn, obj Obj, cas bool, casRev Revision) (old Obj, hadOld bool, err error) {
	tt, pk, cur, err := t.prepareWrite(txn, obj, cas, casRev, "compare-and-swap")
	if err != nil {
		return cur, errors.Is(err, ErrRevisionNotEqual), err
	}
	return t.write(tt, pk, obj, "Insert")
}

func (t *table[Obj]) Modify(txn WriteTxn, obj Obj, merge func(old, new Obj) Obj) (old Obj, hadOld bool, err error) {
	tt, pk, _, err := t.prepareWrite(txn, obj, false, 0, "")
	if err != nil {
		return old, false, err
	}
	if stored, found := tt.entry.root(0).Get(pk); found {
		obj = merge(t.obj(stored), obj)
		mpk, err := t.primaryKey(obj)
		if err != nil {
			return old, false, err
		}
		if !bytes.Equal(mpk, pk) {
			return old, false, tableError(t.name, fmt.Errorf("%w: Modify of %q: merge returned an object with primary key %q", ErrPrimaryKey, pk, mpk))
		}
		return t.write(tt, pk, obj, "Modify (merge returned the stored object)")
	}
	return t.write(tt, pk, obj, "Modify")
}

// write inserts obj under its primary key pk, replacing the stored object
// of that key, and updates every other index. op names the operation in
// the panic that catches the stored object inserted again.
func (t *table[Obj]) write(tt *txnTable, pk index.Key, obj Obj, op string) (old Obj, hadOld bool, err error) {
	primary := tt.txn(0)
	if err := t.checkUnique(tt, obj, pk); err != nil {
		return old, false, err
	}

	rev := tt.entry.revision + 1
	tt.entry.revision = rev
	tt.dirty, tt.changed = true, true
	newObj := storeObject(t.direct, obj, rev)
	oldObj, hadOld := primary.Insert(pk, newObj)
	if hadOld {
		old = t.obj(oldObj)
		if t.isPointer && oldObj.ptr == newObj.ptr {
			panic(fmt.Sprintf("statedb: table %q: %s of the object that is already stored (key %q). "+
				"Objects are immutable once inserted: clone the object, modify the clone and insert that.", t.name, op, pk))
		}
	}

	if hadOld {
		tt.revRemove(oldObj.revision)
	}
	tt.revAdd(newObj)

	// A re-inserted object is alive again: it leaves the graveyard.
	if g := tt.entry.indexes[t.graveyardIndex()]; g.Len() > 0 || tt.txns[t.graveyardIndex()] != nil {
		if dead, ok := tt.txn(t.graveyardIndex()).Delete(pk); ok {
			tt.txn(t.graveyardRevisionIndex()).Delete(tt.revKey(dead.revision))
		}
	}

	deferred := false
	for i, idx := range t.secondary {
		pos := i + 1
		if t.deferred[pos] {
			deferred = true
			continue
		}
		if appendKey := t.appendKey[i]; appendKey != nil {
			t.writeOneKey(tt, pos, appendKey, pk, obj, old, hadOld, newObj)
			continue
		}
		newKeys := idx.fromObject(obj)
		itxn := tt.txn(pos)
		if hadOld {
			oldKeys := idx.fromObject(old)
			oldKeys.Foreach(func(k index.Key) {
				if !hasKey(newKeys, k) {
					itxn.Delete(t.secondaryTreeKey(tt, pos, k, pk))
				}
			})
		}
		newKeys.Foreach(func(k index.Key) {
			if t.plain[pos] {
				itxn.Insert(k, newObj)
			} else {
				// Built in the transaction's scratch buffer: the tree
				// copies it only if the entry is new.
				itxn.InsertCopy(t.secondaryTreeKey(tt, pos, k, pk), newObj)
			}
		})
	}
	if deferred {
		tt.record(secWrite{pk: pk, old: oldObj, new: newObj, hadOld: hadOld, hasNew: true})
	}
	return old, hadOld, nil
}

// writeOneKey is write's update of secondary index pos, whose objects have
// at most one key, built by appendKey in tt's buffers: an object written
// again with the key it had (a status written) replaces its entry, one
// whose key changed moves, and nothing is allocated for the keys. It does
// what the KeySet path does for such an index, unique or not: its tree
// keys hold the primary key (an LPMIndex's do), and checkUnique covers a
// unique one's key before the write.
func (t *table[Obj]) writeOneKey(tt *txnTable, pos int, appendKey func([]byte, Obj) ([]byte, bool), pk index.Key, obj, old Obj, hadOld bool, newObj object) {
	itxn := tt.txn(pos)
	var newKey []byte
	hasNew := false
	tt.keyBufs[0], hasNew = appendKey(tt.keyBufs[0][:0], obj)
	newKey = tt.keyBufs[0]
	if hadOld {
		oldKey, hasOld := appendKey(tt.keyBufs[1][:0], old)
		tt.keyBufs[1] = oldKey
		if hasOld && (!hasNew || !bytes.Equal(oldKey, newKey)) {
			itxn.Delete(t.secondaryTreeKey(tt, pos, oldKey, pk))
		}
	}
	if hasNew {
		itxn.InsertCopy(t.secondaryTreeKey(tt, pos, newKey, pk), newObj)
	}
}

// checkUnique fails if a key of obj in a unique secondary index belongs to
// an object with another primary key. It runs before anything is written,
// so a failed Insert leaves the transaction unchanged.
func (t *table[Obj]) checkUnique(tt *txnTable, obj Obj, pk index.Key) error {
	for i, idx := range t.secondary {
		pos := i + 1
		if !t.unique[pos] {
			continue
		}
		var err error
		root := tt.entry.root(pos)
		idx.fromObject(obj).Foreach(func(k index.Key) {
			if err != nil {
				return
			}
			var other object
			var found bool
			if t.plain[pos] {
				other, found = root.Get(k)
			} else {
				// A unique LPM index: the entries of k are at most one.
				_, other, found = root.Prefix(nonUniqueExact(k)).Minimum()
			}
			if found {
				otherPK, _ := t.primaryKey(t.obj(other))
				if !bytes.Equal(otherPK, pk) {
					err = tableError(t.name, fmt.Errorf("%w: index %q key %q is held by the object with primary key %q", ErrUniqueConstraint, t.indexNames[pos], k, otherPK))
				}
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// secondaryTreeKey returns the tree key of an object in secondary index pos:
// k itself, or for a non-unique (or LPM) index the encoding of k and the
// primary key pk, built in tt's scratch buffer, so valid only until the
// next call (for a lookup, a delete or InsertCopy).
func (t *table[Obj]) secondaryTreeKey(tt *txnTable, pos int, k, pk index.Key) []byte {
	if t.plain[pos] {
		return k
	}
	tt.scratch = appendNonUnique(tt.scratch[:0], k, pk)
	return tt.scratch
}

func hasKey(ks index.KeySet, k index.Key) bool {
	found := false
	ks.Foreach(func(x index.Key) { found = found || bytes.Equal(x, k) })
	return found
}

func (t *table[Obj]) Delete(txn WriteTxn, obj Obj) (old Obj, hadOld bool, err error) {
	return t.delete(txn, obj, false, 0)
}

func (t *table[Obj]) CompareAndDelete(txn WriteTxn, rev Revision, obj Obj) (old Obj, hadOld bool, err error) {
	return t.delete(txn, obj, true, rev)
}

func (t *table[Obj]) delete(txn WriteTxn, obj Obj, cas bool, casRev Revision) (old Obj, hadOld bool, err error) {
	tt, pk, cur, err := t.prepareWrite(txn, obj, cas, casRev, "compare-and-delete")
	if err != nil {
		return cur, errors.Is(err, ErrRevisionNotEqual), err
	}
	oldObj, hadOld := tt.txn(0).Delete(pk)
	if !hadOld {
		return old, false, nil
	}
	t.removeIndexed(tt, pk, oldObj)
	return t.obj(oldObj), true, nil
}

// removeIndexed finishes the delete of oldObj (already gone from the primary
// index): a new revision, the other indexes, and the graveyard when some
// change iterator still has to see the delete.
func (t *table[Obj]) removeIndexed(tt *txnTable, pk index.Key, oldObj object) {
	rev := tt.entry.revision + 1
	tt.entry.revision = rev
	tt.dirty, tt.changed = true, true
	tt.revRemove(oldObj.revision)
	old := t.obj(oldObj)
	deferred := false
	for i, idx := range t.secondary {
		pos := i + 1
		if t.deferred[pos] {
			deferred = true
			continue
		}
		itxn := tt.txn(pos)
		idx.fromObject(old).Foreach(func(k index.Key) {
			itxn.Delete(t.secondaryTreeKey(tt, pos, k, pk))
		})
	}
	if deferred {
		tt.record(secWrite{pk: pk, old: oldObj, hadOld: true})
	}
	if t.trackers.count.Load() > 0 {
		dead := object{ptr: oldObj.ptr, revision: rev}
		tt.txn(t.graveyardIndex()).Insert(pk, dead)
		tt.txn(t.graveyardRevisionIndex()).Insert(index.Uint64(rev), dead)
	}
}

func (t *table[Obj]) DeleteAll(txn WriteTxn) error {
	tt, err := txnTableOf(txn, t.tableMeta)
	if err != nil {
		return err
	}
	primary := tt.txn(0)
	// Iterate a frozen snapshot while deleting from the live transaction.
	for k := range tt.entry.snapshot(0).All {
		if oldObj, had := primary.Delete(k); had {
			t.removeIndexed(tt, k, oldObj)
		}
	}
	return nil
}

func (t *table[Obj]) RegisterInitializer(txn WriteTxn, name string) (done func(WriteTxn)) {
	tt, err := txnTableOf(txn, t.tableMeta)
	if err != nil {
		panic(fmt.Sprintf("statedb: RegisterInitializer %q: %v; pass a WriteTxn that locks the table", name, err))
	}
	init := tt.ownInit()
	if len(init.pending) == 0 {
		if tt.initDone {
			// The last initializer finished earlier in this transaction:
			// its channel, which readers may hold, was never closed. Keep
			// it, so that it closes when this initializer is done too.
			tt.initDone = false
		} else {
			init.watch = make(chan struct{})
		}
	}
	ini := &initializer{name: name}
	init.pending = append(init.pending, ini)
	tt.dirty = true
	return func(txn WriteTxn) {
		tt, err := txnTableOf(txn, t.tableMeta)
		if err != nil {
			panic(fmt.Sprintf("statedb: initializer %q done: %v; pass a WriteTxn that locks the table", name, err))
		}
		// Whether done was already called is read from the transaction's
		// state, not remembered here: a done whose WriteTxn was aborted did
		// not happen and must count when it is called again.
		if tt.entry.init == nil {
			return
		}
		i := slices.Index(tt.entry.init.pending, ini)
		if i < 0 {
			return
		}
		init := tt.ownInit()
		init.pending = slices.Delete(init.pending, i, i+1)
		tt.dirty = true
		if len(init.pending) == 0 {
			tt.initDone = true
		}
	}
}
