// Package statedb is an in-memory database of typed tables for programs
// that keep some real system in line with a desired state held in memory.
// Writers change tables in transactions; readers take snapshots that never
// change and never block; watch channels and change iterators tell readers
// what changed, deletes included.
//
// Tables live on persistent (copy-on-write) radix trees: a write copies
// the path to what it changes and shares the rest, so a snapshot is one
// pointer and costs nothing to keep. The package has no dependency outside
// the standard library and this module; its hive cells and Prometheus
// metrics live in statedb/statedbcell.
//
// # Basics
//
// A table holds objects of one Go type, usually pointers. Each table has a
// unique primary index and any number of secondary indexes (unique or
// not), each an Index value that maps an object to its keys (see package
// index for order-preserving key encoders):
//
//	byPrefix := statedb.Index[*Route, netip.Prefix]{
//		Name:       "prefix",
//		FromObject: func(r *Route) index.KeySet { return index.NewKeySet(index.NetIPPrefix(r.Prefix)) },
//		FromKey:    index.NetIPPrefix,
//		Unique:     true,
//	}
//	db := statedb.New()
//	routes, err := statedb.NewTable(db, "routes", byPrefix)
//	if err != nil { ... }
//
//	wtxn := db.WriteTxn(routes) // locks exactly this table
//	routes.Insert(wtxn, &Route{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Dev: "eth0"})
//	rtxn := wtxn.Commit()       // publishes atomically; a snapshot with the write
//
//	r, rev, found := routes.Get(rtxn, byPrefix.Query(netip.MustParsePrefix("10.0.0.0/8")))
//	for r, rev := range routes.All(db.ReadTxn()) { ... }
//
// Every read has a ...Watch twin that also returns a channel that closes
// when the result may have changed; select on it, then read again from a
// new ReadTxn. A WatchSet waits on many such channels at once and says
// which closed. Table.Changes registers a ChangeIterator that yields every
// insert and delete from then on, in revision order; Observable offers the
// same as a stream for an observer (hive/job's Observer), coalesced by key
// when the observer is slow. A Deriver keeps one table as a transform of
// another. NewHTTPHandler serves the tables for inspection, Client reads
// them, RenderTable shows them as text. Each DB has an ID of its own
// (DB.ID), which the HTTP API sends with every answer, so that a client
// knows when the program behind it restarted and its revisions began
// again.
//
// Give writers the RWTable and everyone else RWTable.ToTable(), the
// read-only view. Besides Insert and Delete (and their compare-and-swap
// forms CompareAndSwap and CompareAndDelete), RWTable.Modify inserts an
// object or merges it with the stored one of the same primary key, in one
// step.
//
// # Queries
//
// A Query names an index and a key; build it from the table's own index
// values: Index.Query, Index.QueryString (a key given as text),
// Index.PrefixQueryString (the beginning of a key given as text, for
// Prefix and Last; Index.KeyFormat and KeyExample say how keys are
// written), Index.QueryAll (every key of the index), ByRevision for the
// revision index every table keeps, and LPMIndex.Query (an address),
// LPMIndex.QueryPrefix, LPMIndex.QueryString and LPMIndex.QueryAll for a
// longest-prefix-match index. The reads of a Table, each with a ...Watch
// twin:
//
//   - Get: the first object whose key equals the query key (on a
//     non-unique index, the first in primary key order).
//   - List: every object whose key equals the query key.
//   - Prefix: every object whose key starts with the query key, in key
//     order.
//   - LowerBound: every object whose key is >= the query key, ascending.
//   - ReverseLowerBound: every object whose key is <= the query key,
//     descending.
//   - Last: the last object whose key starts with the query key (with
//     QueryAll, the last of the index).
//   - All: every object in primary key order.
//   - Matches: on an LPMIndex, the objects of every stored prefix that
//     contains the query's address or prefix, longest first.
//
// On a non-unique index an object appears once per key it has, and the
// objects of one key come in primary key order. An LPMIndex indexes
// objects by netip.Prefix (one per object through its Prefix, several
// through its FromObject; unique or not, IPv4 and IPv6 apart); on it Get
// and List answer the longest-prefix match ("the route that covers
// 10.1.2.3") and Prefix the prefixes within a prefix. The
// HTTP API names the reads it serves by QueryOp (QueryGet, QueryList,
// QueryPrefix, QueryLowerBound, QueryReverseLowerBound, QueryLast, and
// QueryLPM for List on an LPM index); its table dump is All.
//
// # Invariants
//
// Objects are immutable once inserted. A reader may hold a stored object
// for as long as it likes and read it without locks, because nothing
// changes it: to change an object, clone it, modify the clone and insert
// the clone. For tables of pointers, inserting the very pointer that is
// already stored is caught and panics, since it can only mean the stored
// object was modified in place (table_write.go).
//
// A ReadTxn is one atomic load. DB.ReadTxn loads the current root (the
// state of every table) with one atomic operation: it never blocks, never
// allocates, and never sees part of a commit, because a commit builds a
// whole new root and publishes it with one atomic store. A snapshot never
// changes; reads from it see exactly the state at that moment, across all
// tables. A WriteTxn is a ReadTxn too: reads through it see its own
// uncommitted writes.
//
// Writers never deadlock. DB.WriteTxn names the tables it will write and
// locks exactly those; writers of other tables run in parallel. The lock
// order, step by step (write_txn.go implements it):
//
//  1. DB.WriteTxn sorts its tables by their position (the order in which
//     they were created) and locks them in that order. Every writer takes
//     table locks in the same global order, so no cycle can form.
//  2. Commit builds the new state of its tables without any other lock.
//  3. Commit takes the DB's mutex, the innermost lock, copies the current
//     root, replaces its own tables' entries (other tables keep whatever
//     other writers published meanwhile) and publishes the new root with
//     one atomic store. The mutex is held for the copy of a slice, nothing
//     more.
//  4. Only then are watch channels closed, so a reader woken by one that
//     takes a ReadTxn sees the change.
//  5. Finally the table locks are released, in reverse order.
//
// Watch channels are never missed. A channel returned by a ...Watch read
// closes once a commit changes what it watches (it may close spuriously,
// after an unrelated change near it, but never stays open after a relevant
// commit). This holds for channels taken from any snapshot, however old,
// and for channels taken through a WriteTxn: such a read freezes what the
// transaction wrote so far, so that a later write of the same transaction
// copies instead of changing it in place, and the transaction's Commit
// closes the channel when that write changed what it watches (an Abort
// closes nothing: nothing changed). See tableEntry.snapshot in table.go.
//
// Deletes are never lost, and kept no longer than needed. While a change
// iterator is registered on a table, every object deleted from it is kept
// in the table's graveyard until every registered iterator's Next has
// passed the delete's revision; then it is freed. So the graveyard holds at
// most the objects deleted since the slowest registered iterator last
// called Next; an object inserted again leaves it at once; with no iterator
// registered nothing is kept. Close (or the garbage collection of an
// iterator that was not closed) unregisters an iterator. Freeing happens
// under the table's write lock, at the commit of any WriteTxn of the table,
// and in Next and Close when no writer holds the table (graveyard.go).
//
// Memory depends on live data, never on the number of transactions. What
// the DB keeps is its current objects, the graveyard above, and what the
// snapshots and iterators a program still holds refer to; a commit leaves
// nothing behind that grows with the number of commits, for any mix of
// tables. In particular a committed table entry owns its index array and
// never points into the WriteTxn that made it: were it to, every kept entry
// would keep that transaction's copy of the whole root, and with it the
// entries of every other table as of then, and so on back through history
// (table.go, write_txn.go).
//
// # Errors
//
// Errors are matched with errors.Is against the sentinels in errors.go;
// each names the table it concerns (Index.QueryString's, which knows no
// table, the index). Bad table or index names, a primary
// index that is not unique, duplicate index names and a second table of the
// same name are errors from NewTable, never panics. What can only be a bug
// panics with a message that says how to fix it: the same pointer inserted
// twice, a table used with a ReadTxn of another DB, a query built from an
// Index of another table.
//
// # Caveats
//
//   - Call exactly one of Commit or Abort on every WriteTxn (`defer
//     wtxn.Abort()` is safe after Commit). A WriteTxn that is dropped holds
//     its tables' locks, and every other writer of them waits, until the
//     garbage collector finds it; it is then reported to the DB's logger and
//     its locks are released.
//   - Keep write transactions short: writers of the same table wait for
//     each other. Readers never wait.
//   - Close change iterators you no longer use: until then (or until the
//     garbage collector finds them), deletes are kept for them.
//   - An HTTP change stream (GET /tables/{table}/changes) holds a change
//     iterator. A client that cannot take a batch of changes within the
//     stream write timeout (DefaultStreamWriteTimeout, see
//     WithStreamWriteTimeout) is dropped, so that it cannot pin deletes in
//     memory; it must reconnect and start again from a full listing.
//   - Revisions are per table: compare revisions of the same table only.
//   - Table and index names follow one rule, [a-z][a-z0-9_-]{0,63}; index
//     names starting with "_" are reserved for the indexes every table
//     keeps (RevisionIndex).
package statedb
