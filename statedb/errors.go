package statedb

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error of a table, an index, a transaction or a
// Deriver wraps one of them and names the table it concerns (Index.QueryString,
// which knows no table, names the index); match with errors.Is. A
// WatchSet's errors concern no table: ErrWatchSetEmpty, or its context's
// error wrapped with the number of channels it waited on. The HTTP
// client's errors are an *APIError for an error answer of the API, else the
// transport's or the decoder's error.
var (
	// ErrTableNotLockedForWriting is returned when a WriteTxn is used to
	// modify a table it did not name in DB.WriteTxn.
	ErrTableNotLockedForWriting = errors.New("table not locked for writing")

	// ErrTransactionClosed is returned when a WriteTxn is used after Commit
	// or Abort.
	ErrTransactionClosed = errors.New("transaction closed")

	// ErrRevisionNotEqual is returned by CompareAndSwap and CompareAndDelete
	// when the stored object has a different revision than the one given.
	ErrRevisionNotEqual = errors.New("revision not equal")

	// ErrObjectNotFound is returned by CompareAndSwap and CompareAndDelete
	// when no object with the primary key exists.
	ErrObjectNotFound = errors.New("object not found")

	// ErrUniqueConstraint is returned by Insert and CompareAndSwap when the
	// object's key in a unique secondary index is already held by another
	// object. The transaction is left unchanged.
	ErrUniqueConstraint = errors.New("unique index constraint violated")

	// ErrPrimaryKey is returned by Insert and CompareAndSwap when the primary
	// index yields no key or more than one key for the object.
	ErrPrimaryKey = errors.New("primary index must yield exactly one key")

	// ErrInvalidTableName is returned by NewTable for a name that breaks
	// the name rule (see NewTable).
	ErrInvalidTableName = errors.New("invalid table name")

	// ErrInvalidIndex is returned by NewTable for a bad index: a non-unique
	// primary index, a missing FromObject or FromKey, an invalid or
	// duplicate index name.
	ErrInvalidIndex = errors.New("invalid index")

	// ErrDuplicateTable is returned by NewTable when the database already has
	// a table of that name.
	ErrDuplicateTable = errors.New("duplicate table")

	// ErrBadQuery is returned for a query given as text (Index.QueryString,
	// the HTTP API, a CLI) that names an unknown index or operation or has a
	// key that cannot be parsed.
	ErrBadQuery = errors.New("bad query")

	// ErrInvalidDeriver is returned by NewDeriver for a nil transform.
	ErrInvalidDeriver = errors.New("invalid deriver")

	// ErrDeriverRunning is returned by Deriver.Run while another call of
	// Run on the same Deriver is in progress.
	ErrDeriverRunning = errors.New("deriver already running")

	// ErrDeriverClosed is returned by Deriver.Run after Close.
	ErrDeriverClosed = errors.New("deriver closed")

	// ErrWatchSetEmpty is returned by WatchSet.Wait on a set without
	// channels, which nothing but its context could ever wake. It concerns
	// no table.
	ErrWatchSetEmpty = errors.New("watch set is empty")
)

// tableError wraps err with the name of the table it concerns.
func tableError(table string, err error) error {
	return fmt.Errorf("table %q: %w", table, err)
}
