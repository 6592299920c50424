package reconciler

import (
	"github.com/steadystate/steadystate/statedb"
)

// DesiredWriter writes desired objects idempotently: re-asserting an object
// that is unchanged apart from its status writes nothing, so it causes no
// Update. Writers that always re-insert (a loader re-reading its file, a
// controller resyncing) would otherwise reset every object to Pending and
// cause endless reconcile loops.
type DesiredWriter[Obj any] struct {
	Table statedb.RWTable[Obj]
	// Equal reports whether two objects describe the same desired state.
	// It must ignore the status.
	Equal           func(a, b Obj) bool
	SetObjectStatus func(Obj, Status) Obj
}

// Upsert inserts obj with status Pending, unless the stored object with the
// same primary key is Equal to it. It returns whether it wrote. obj must be
// a new object owned by the caller (its status is set in place). Errors are
// those of RWTable.Insert.
func (w DesiredWriter[Obj]) Upsert(txn statedb.WriteTxn, obj Obj) (written bool, err error) {
	q := statedb.QueryByPrimaryKey[Obj](w.Table, w.Table.PrimaryKey(obj))
	if cur, _, found := w.Table.Get(txn, q); found && w.Equal(cur, obj) {
		return false, nil
	}
	if _, _, err := w.Table.Insert(txn, w.SetObjectStatus(obj, StatusPending())); err != nil {
		return false, err
	}
	return true, nil
}

// Put inserts obj with status Pending without first looking at the stored
// object: for a writer that expects none (the first fill of an empty
// table), which saves Upsert's lookup. A stored object of obj's primary
// key is replaced, Equal to obj or not, and returned (old, hadOld). obj
// must be a new object owned by the caller (its status is set in place).
// Errors are those of RWTable.Insert.
func (w DesiredWriter[Obj]) Put(txn statedb.WriteTxn, obj Obj) (old Obj, hadOld bool, err error) {
	return w.Table.Insert(txn, w.SetObjectStatus(obj, StatusPending()))
}

// Delete deletes the object with obj's primary key; it returns whether there
// was one.
func (w DesiredWriter[Obj]) Delete(txn statedb.WriteTxn, obj Obj) (deleted bool, err error) {
	_, deleted, err = w.Table.Delete(txn, obj)
	return deleted, err
}
