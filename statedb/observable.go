package statedb

import "context"

// TableObservable is a source of a table's changes for code that consumes
// values one at a time, such as the Observer job of hive/job, whose
// Observable interface it satisfies by its method set (this package does
// not import hive). Create it with Observable.
type TableObservable[Obj any] struct {
	db    *DB
	table Table[Obj]
}

// Observable returns the changes of table, of db, as an observable: every
// object present when Observe starts, as an insert, then every insert and
// delete as it is committed, each with its revision, in revision order.
//
// A table holds state, not events, so the observable delivers the state
// of each object rather than each write: it is a change iterator
// (Table.Changes) read while the observer keeps up. When the observer is
// slower than the writers, the changes are coalesced by primary key: an
// object written many times meanwhile is delivered once, as it is when
// its turn comes, and one deleted is delivered once, as a delete. No
// delete is lost (the change iterator keeps deleted objects until they
// are delivered), and what is kept for a slow observer is bounded by the
// number of objects written or deleted since it last caught up, never by
// the number of writes.
func Observable[Obj any](db *DB, table Table[Obj]) *TableObservable[Obj] {
	return &TableObservable[Obj]{db: db, table: table}
}

// Observe calls next with each change, in the calling goroutine, until ctx
// ends; it then stops (also in the middle of a batch of changes), releases
// its change iterator and calls complete(ctx.Err()). If the change
// iterator cannot be registered (a table of another DB panics, as
// DB.WriteTxn does), it calls complete with that error at once. next must
// not keep the Change's object for changing: objects are immutable once
// inserted.
func (o *TableObservable[Obj]) Observe(ctx context.Context, next func(Change[Obj]), complete func(error)) {
	wtxn := o.db.WriteTxn(o.table)
	it, err := o.table.Changes(wtxn)
	wtxn.Commit()
	if err != nil {
		complete(err)
		return
	}
	for {
		changes, watch := it.Next(o.db.ReadTxn())
		for c := range changes {
			if ctx.Err() != nil {
				break
			}
			next(c)
		}
		select {
		case <-ctx.Done():
			it.Close()
			complete(ctx.Err())
			return
		case <-watch:
		}
	}
}
