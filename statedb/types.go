package statedb

import (
	"iter"
	"net/netip"

	"github.com/steadystate/steadystate/index"
)

// Revision is a per-table counter. Every insert and every delete of an
// object advances its table's revision by one; an object carries the revision
// at which it was last written.
type Revision = uint64

// ReadTxn is an immutable snapshot of every table. It is obtained with
// DB.ReadTxn, from WriteTxn.Commit, or is a WriteTxn itself (then reads see
// the transaction's own writes). The interface is sealed.
type ReadTxn interface {
	// tableEntry returns the table's state in this snapshot, or nil when the
	// table did not exist yet when the snapshot was taken.
	tableEntry(meta TableMeta) *tableEntry
}

// WriteTxn is a read-write transaction over the tables named in DB.WriteTxn.
// Exactly one of Commit or Abort must be called; a transaction that is
// dropped without either is reported when it is garbage collected and its
// locks are released then (until then, every other writer of its tables
// waits).
type WriteTxn interface {
	ReadTxn

	// Commit publishes all writes atomically and returns a snapshot that
	// includes them. Watch channels are closed after the new state is
	// visible. Calling Commit twice, or after Abort, returns the snapshot
	// the transaction was committed as, or nil after Abort.
	Commit() ReadTxn

	// Abort discards the writes and releases the locks. It is a no-op after
	// Commit, so `defer wtxn.Abort()` is safe.
	Abort()
}

// TableMeta is the untyped part of a table, used to name tables when
// opening a WriteTxn. It is implemented only by tables of this package.
type TableMeta interface {
	// Name returns the table's name.
	Name() string

	meta() *tableMeta
}

// Indexer is an index definition of a table of Obj. It is implemented by
// Index; the interface exists so that indexes with different key types can be
// passed to NewTable together.
type Indexer[Obj any] interface {
	indexName() string
	isUnique() bool
	fromObject(obj Obj) index.KeySet
	fromString(s string) (index.Key, error)
}

// Query is a lookup in one index of a table of Obj, built with Index.Query,
// Index.QueryString, Index.QueryAll, ByRevision, or the Query methods of
// LPMIndex.
type Query[Obj any] struct {
	index string
	key   index.Key
	// addr is the address of an LPMIndex.Query, whose key is encoded when
	// the query is run (into a buffer on the reader's stack; see keyIn),
	// not when it is built, so that a longest-prefix lookup allocates
	// nothing. key is nil then.
	addr netip.Addr
}

// IndexName returns the name of the index the query is for.
func (q Query[Obj]) IndexName() string { return q.index }

// Key returns the encoded key of the query.
func (q Query[Obj]) Key() index.Key {
	if q.addr.IsValid() {
		return lpmKey(netip.PrefixFrom(q.addr, q.addr.BitLen()))
	}
	return q.key
}

// keyIn returns the encoded key of the query, encoded into buf if it is
// an LPM address query's. The key is valid while buf is.
func (q *Query[Obj]) keyIn(buf *lpmKeyBuf) index.Key {
	if q.addr.IsValid() {
		return lpmAppendKey(buf[:0], netip.PrefixFrom(q.addr, q.addr.BitLen()))
	}
	return q.key
}

// Table is the read-only view of a table of Obj. Every read takes a ReadTxn
// and sees exactly the snapshot of that transaction; reads never block.
//
// Each read that returns an iterator has a ...Watch twin that also returns a
// channel that closes when the result may have changed (it may close
// spuriously, but never stays open after a relevant commit).
type Table[Obj any] interface {
	TableMeta

	// Revision returns the highest revision written to the table.
	Revision(txn ReadTxn) Revision

	// NumObjects returns the number of objects in the table.
	NumObjects(txn ReadTxn) int

	// Initialized reports whether every registered initializer is done, and
	// returns a channel that closes once they are.
	Initialized(txn ReadTxn) (bool, <-chan struct{})

	// Get returns the first object matching the query: on a non-unique
	// index the first in primary key order, on an LPMIndex the first of
	// the longest prefix that contains the query's address or prefix.
	Get(txn ReadTxn, q Query[Obj]) (obj Obj, rev Revision, found bool)

	// GetWatch is Get with a channel that closes when the object matching
	// the query is inserted, replaced or deleted.
	GetWatch(txn ReadTxn, q Query[Obj]) (obj Obj, rev Revision, watch <-chan struct{}, found bool)

	// List returns every object whose key in the query's index equals the
	// query key exactly (one at most for a unique index), in primary key
	// order; on an LPMIndex, every object of the longest prefix that
	// contains the query's address or prefix.
	List(txn ReadTxn, q Query[Obj]) iter.Seq2[Obj, Revision]

	// ListWatch is List with a channel that closes when the result may
	// have changed.
	ListWatch(txn ReadTxn, q Query[Obj]) (iter.Seq2[Obj, Revision], <-chan struct{})

	// Prefix returns every object whose key in the query's index starts with
	// the query key, in key order.
	Prefix(txn ReadTxn, q Query[Obj]) iter.Seq2[Obj, Revision]

	// PrefixWatch is Prefix with a channel that closes when anything under
	// the prefix changes.
	PrefixWatch(txn ReadTxn, q Query[Obj]) (iter.Seq2[Obj, Revision], <-chan struct{})

	// LowerBound returns every object whose key in the query's index is
	// greater than or equal to the query key, in key order. With
	// ByRevision it returns objects changed at or after a revision.
	LowerBound(txn ReadTxn, q Query[Obj]) iter.Seq2[Obj, Revision]

	// LowerBoundWatch is LowerBound with a channel that closes on any change
	// to the table.
	LowerBoundWatch(txn ReadTxn, q Query[Obj]) (iter.Seq2[Obj, Revision], <-chan struct{})

	// ReverseLowerBound returns every object whose key in the query's
	// index is less than or equal to the query key, in descending key
	// order (on a non-unique index, by key and then primary key, an object
	// once per key it has, as Prefix does).
	ReverseLowerBound(txn ReadTxn, q Query[Obj]) iter.Seq2[Obj, Revision]

	// ReverseLowerBoundWatch is ReverseLowerBound with a channel that
	// closes on any change to the table.
	ReverseLowerBoundWatch(txn ReadTxn, q Query[Obj]) (iter.Seq2[Obj, Revision], <-chan struct{})

	// Last returns the last object, in key order, whose key in the query's
	// index starts with the query key: the last object Prefix would
	// return. With a query from Index.QueryAll it is the index's last
	// object.
	Last(txn ReadTxn, q Query[Obj]) (obj Obj, rev Revision, found bool)

	// LastWatch is Last with a channel that closes when anything under the
	// query key changes.
	LastWatch(txn ReadTxn, q Query[Obj]) (obj Obj, rev Revision, watch <-chan struct{}, found bool)

	// Matches returns, for a query on an LPMIndex, the objects of every
	// stored prefix that contains the query's address or prefix, longest
	// prefix first (the objects of one prefix in primary key order). A
	// query on another kind of index panics: it can only be a bug.
	Matches(txn ReadTxn, q Query[Obj]) iter.Seq2[Obj, Revision]

	// MatchesWatch is Matches with a channel that closes when a prefix of
	// the query's address family gains or loses an object.
	MatchesWatch(txn ReadTxn, q Query[Obj]) (iter.Seq2[Obj, Revision], <-chan struct{})

	// All returns every object in primary key order.
	All(txn ReadTxn) iter.Seq2[Obj, Revision]

	// AllWatch is All with a channel that closes on any change to the
	// table.
	AllWatch(txn ReadTxn) (iter.Seq2[Obj, Revision], <-chan struct{})

	// Changes registers a change iterator that yields every insert and
	// delete from now on. See ChangeIterator.
	Changes(txn WriteTxn) (ChangeIterator[Obj], error)

	// Indexes returns the names of the table's indexes, primary first.
	Indexes() []string

	// PrimaryKey returns the object's key in the primary index (nil if the
	// index yields no key).
	PrimaryKey(obj Obj) index.Key
}

// RWTable is a table that can be written. It is handed only to the table's
// writers; everyone else gets ToTable().
type RWTable[Obj any] interface {
	Table[Obj]

	// Insert inserts or replaces the object with the same primary key and
	// returns the replaced one. Errors: ErrTransactionClosed,
	// ErrTableNotLockedForWriting, ErrPrimaryKey, ErrUniqueConstraint.
	// Inserting the very pointer that is already stored panics: objects are
	// immutable once inserted, so clone, modify the clone and insert it.
	Insert(txn WriteTxn, obj Obj) (old Obj, hadOld bool, err error)

	// Modify inserts obj or, when an object with the same primary key is
	// stored, merge(stored, obj) instead, and returns the object it
	// replaced. merge must return a new object (such as a modified clone
	// of either argument) with the same primary key, and must not change
	// the stored object, which readers may be using: objects are
	// immutable once inserted, so returning the stored object itself
	// panics, as Insert of it does. Errors: those of Insert (ErrPrimaryKey
	// also when merge changed the primary key); on an error nothing is
	// written.
	Modify(txn WriteTxn, obj Obj, merge func(old, new Obj) Obj) (old Obj, hadOld bool, err error)

	// CompareAndSwap inserts obj only if the stored object with the same
	// primary key has revision rev. Errors: those of Insert,
	// ErrObjectNotFound, ErrRevisionNotEqual (old is then the stored
	// object).
	CompareAndSwap(txn WriteTxn, rev Revision, obj Obj) (old Obj, hadOld bool, err error)

	// Delete deletes the object with obj's primary key; a missing object is
	// not an error. Errors: ErrTransactionClosed,
	// ErrTableNotLockedForWriting, ErrPrimaryKey.
	Delete(txn WriteTxn, obj Obj) (old Obj, hadOld bool, err error)

	// CompareAndDelete deletes the object only if it has revision rev.
	// Errors: those of Delete, ErrObjectNotFound, ErrRevisionNotEqual.
	CompareAndDelete(txn WriteTxn, rev Revision, obj Obj) (old Obj, hadOld bool, err error)

	// DeleteAll deletes every object. Errors: ErrTransactionClosed,
	// ErrTableNotLockedForWriting.
	DeleteAll(txn WriteTxn) error

	// RegisterInitializer marks the table as not initialized until the
	// returned function has been called (with a WriteTxn that locks this
	// table, and that then commits). Calling done more than once is a
	// no-op.
	RegisterInitializer(txn WriteTxn, name string) (done func(WriteTxn))

	// ToTable returns the read-only view of the table.
	ToTable() Table[Obj]
}

// Change is one insert or delete seen by a ChangeIterator.
type Change[Obj any] struct {
	Object   Obj
	Revision Revision
	Deleted  bool
}

// ChangeIterator yields the net changes to a table since its last call.
type ChangeIterator[Obj any] interface {
	// Next returns the changes since the last call (first call: every object
	// present, as inserts) and a channel that closes when there are more.
	Next(txn ReadTxn) (iter.Seq2[Change[Obj], Revision], <-chan struct{})

	// Close unregisters the iterator; deleted objects are then no longer
	// kept for it.
	Close()
}
