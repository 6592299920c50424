// Package reflector fills statedb tables from a source of desired objects
// that can be listed and then watched, such as etcd or a Kubernetes API
// server: the writer at the start of the path
// source → tables → reconcilers → real system.
//
// A Reflector fills one table; a Multi fills several tables from one
// source (one Into per table) and commits each source revision to all of
// them in one write transaction, so that a node switches from one desired
// state to the next whole: no reader, and no reconciler, ever sees new
// routes beside old rules.
//
// It lists the source at one consistent revision and commits the whole
// list in one write transaction, marking every table's initializer done
// in the same transaction (so a reconciler prunes only against a complete
// table). It then watches the source from the listed revision: events are
// coalesced by key and committed in batches of about Config.BatchSize
// objects, each at most Config.BatchInterval after the end of its
// revision. When the watch is lost, or the source says a resync is needed
// (for example because the revision it watched from was compacted), it
// lists again and replaces: objects that are gone are deleted, changed
// ones written, and unchanged ones left alone, so their reconciliation
// status stays as it is. Objects are written through a
// reconciler.DesiredWriter, which makes every changed object Pending.
//
// A source speaks in events (Event): Put and Delete change one key, at a
// revision; Resync asks for a new list; Progress carries no change and
// says that every change up to its revision has been sent.
//
// Filter drops objects before they are stored (caching only what the
// node needs); Transform turns the source's value into the table's
// object. A value that Transform rejects (an error, or a panic) is
// reported (health Degraded, naming the key and the error, and Rejected)
// and skipped; the table keeps the last good version of that key, and the
// rest of the batch applies.
//
// # Revisions
//
// A source's revisions order its changes; one revision may hold many
// events (an etcd transaction of many keys is one revision). The
// reflector commits only whole revisions and learns that a revision is
// whole when
//
//   - an event of a later revision arrives (a source sends in order),
//   - a Progress at or past it arrives (the source says so: etcd's Source
//     sends one after every watch response, whose events are whole
//     revisions), or
//   - the source has been quiet for BatchInterval after its last event (a
//     source sends the events of one revision without a pause, or marks
//     their end with a Progress). Quiet is measured while the reflector
//     listens: the time it spends committing does not count, and an event
//     ready when the timer fires goes first. A source that breaks the
//     contract (an event of a revision already taken as whole by quiet)
//     makes the reflector list again, so that nothing is lost. A source
//     that marks the end of every revision with a Progress says so
//     (RevisionMarker: the file and etcd sources do), and then quiet
//     never ends a revision: however long its process is starved within
//     one, no part of a revision is taken as whole.
//
// A Progress, or a batch of BatchSize events of whole revisions, is
// committed at once; otherwise the events of whole revisions wait at most
// BatchInterval. One revision is never split between two commits, however
// many events it holds.
//
// # Invariants
//
// Revision never claims too much. Revision reports R only once every
// change of the source up to R is committed to the tables, and the tables
// then hold the source's state at R (filtered, transformed; rejected
// values excepted): after a list at R; after the commit of the whole
// revisions up to R, when R is known whole as above; or, with nothing
// pending, when a Progress at R arrives. A progress at or below the
// revision reached says nothing new and is ignored. A list sets Revision
// to its revision, lower than before if the source went back (restored
// from a backup): the tables hold the list.
//
// No lost delete. Every key the reflector stored is remembered until it is
// deleted; a relist deletes exactly the remembered keys that the new list
// lacks, so a delete missed while the watch was down is still applied.
//
// No object lost when its key changes. Several source keys may hold
// objects with one primary key (a Transform that derives the primary key
// from the value, and a value moved from one key to another). As long as
// any source key holds it, the object stays in the table: the most
// recently written key's value wins, and when that key is deleted (or
// comes to hold another object), the value of the most recently written
// key that still holds it is written again.
//
// Memory changes only with a commit. What the reflector remembers of the
// source (the keys it stored, their values, what it rejected) changes in
// the same step as the commit that writes it: a panic in user code during
// a commit (an index function, the DesiredWriter's Equal) aborts the write
// transaction and undoes every change to that memory, so a Run after it
// lists again and converges, with no lost delete. A panic in Filter or
// Transform is recovered and rejects that value. One step is deferred: a
// first list into empty tables (a program's start) is written without
// entering its keys in that memory; they are kept aside, and entered by a
// goroutine of the reflector's after the commit, once Config.Idle closes
// (or at once, without it), and before anything reads that memory (the
// next commit or list waits for it). Run does not return before it is
// done.
//
// Nothing old overrides the new. Events at or below the revision of the
// last list, at or below a revision a Progress said was complete, or older
// than the latest event received are ignored (a source may replay them
// after a reconnect), and within a batch the latest event of a key wins.
//
// Only the goroutine running Run touches the reflector's state (and the
// goroutine that enters a first list's keys, above, which hands them
// over); Revision, RevisionWatch and Rejected are safe for concurrent use.
// In a first list into an empty table of 2,048 or more values, Filter,
// Transform and the primary index's key run on a goroutine of their own,
// a few chunks of 256 ahead of the writes (see TableSpec.Transform).
package reflector
