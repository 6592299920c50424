package statedb

import (
	"context"
	"fmt"
)

// DeriveResult tells Derive what to do with the output of a transform.
type DeriveResult int

const (
	// DeriveSkip leaves the output table alone for this change. To drop an
	// object that an earlier version of the input produced, return
	// DeriveDelete instead.
	DeriveSkip DeriveResult = iota
	// DeriveInsert inserts or replaces the transformed object.
	DeriveInsert
	// DeriveDelete deletes the transformed object (by its primary key).
	DeriveDelete
)

// DeriveTransform maps a change of an input object to an output object.
// deleted is true when the input object was deleted; the transform then
// usually returns the output object with DeriveDelete. Returning DeriveSkip
// drops the object: it is filtered out of the output table.
type DeriveTransform[In, Out any] func(obj In, deleted bool) (Out, DeriveResult)

// Deriver keeps table Out as a transform of table In: every insert, replace
// and delete of In is propagated to Out through the transform. It writes Out
// and nothing else, so Out should have no other writers.
//
// Run it standalone with Run, or as a job of a hive module. Out is marked
// initialized once In is initialized and its state at that time has been
// propagated.
type Deriver[In, Out any] struct {
	db        *DB
	in        Table[In]
	out       RWTable[Out]
	transform DeriveTransform[In, Out]
	iter      ChangeIterator[In]
	initDone  func(WriteTxn)
}

// NewDeriver registers a change iterator on in and an initializer on out.
// Call Run to start propagating; until then deletes in In are kept for it.
func NewDeriver[In, Out any](db *DB, in Table[In], out RWTable[Out], transform DeriveTransform[In, Out]) (*Deriver[In, Out], error) {
	if transform == nil {
		return nil, fmt.Errorf("derive %s -> %s: transform is nil", in.Name(), out.Name())
	}
	wtxn := db.WriteTxn(in, out)
	defer wtxn.Abort()
	iter, err := in.Changes(wtxn)
	if err != nil {
		return nil, fmt.Errorf("derive %s -> %s: %w", in.Name(), out.Name(), err)
	}
	d := &Deriver[In, Out]{db: db, in: in, out: out, transform: transform, iter: iter}
	d.initDone = out.RegisterInitializer(wtxn, "derive-from-"+in.Name())
	wtxn.Commit()
	return d, nil
}

// Run propagates changes until ctx is cancelled, then unregisters its change
// iterator and returns nil. It returns an error only if writing Out fails,
// which for a correct transform does not happen.
func (d *Deriver[In, Out]) Run(ctx context.Context) error {
	defer d.iter.Close()
	initialized := false
	for {
		rtxn := d.db.ReadTxn()
		changes, watch := d.iter.Next(rtxn)
		var wtxn WriteTxn
		for change := range changes {
			out, res := d.transform(change.Object, change.Deleted)
			if res == DeriveSkip {
				continue
			}
			if wtxn == nil {
				wtxn = d.db.WriteTxn(d.out)
			}
			var err error
			switch res {
			case DeriveInsert:
				_, _, err = d.out.Insert(wtxn, out)
			case DeriveDelete:
				_, _, err = d.out.Delete(wtxn, out)
			}
			if err != nil {
				wtxn.Abort()
				return fmt.Errorf("derive %s -> %s: %w", d.in.Name(), d.out.Name(), err)
			}
		}
		if !initialized {
			if ok, _ := d.in.Initialized(rtxn); ok {
				if wtxn == nil {
					wtxn = d.db.WriteTxn(d.out)
				}
				d.initDone(wtxn)
				initialized = true
			}
		}
		if wtxn != nil {
			wtxn.Commit()
		}
		var initWatch <-chan struct{}
		if !initialized {
			_, initWatch = d.in.Initialized(rtxn)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-watch:
		case <-initWatch:
		}
	}
}
