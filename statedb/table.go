package statedb

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/internal/names"
)

// tableMeta is the untyped, immutable description of a table plus its write
// lock. It lives as long as the DB.
type tableMeta struct {
	db    *DB
	name  string
	pos   int        // position in dbRoot and in the global lock order
	lock  sync.Mutex // held by the WriteTxn that writes the table
	table TableMeta  // the typed table, for DB.Tables

	// Index layout: [0] primary, [1..n] secondary, then the reserved
	// indexes below. The slices below follow the same positions.
	indexNames []string
	unique     []bool // no two objects share a key
	tracked    []bool // watch channels are closed on change (TrackMutate)
	lpm        []bool // an LPMIndex (lpm.go)
	// plain is set where the tree key of an object is its index key
	// (unique indexes but LPM ones); elsewhere it is the index key, a
	// terminator and the primary key (see appendNonUnique).
	plain []bool
	// deferred is set where writes are recorded and replayed later (the
	// non-unique secondary indexes; see deferred_index.go); replayIndex
	// replays them.
	deferred    []bool
	replayIndex func(itxn *treeTxn, pos int, log *writeLog, from int, ks *keyScratch)

	// primaryKeyOf returns the primary key of a stored object.
	primaryKeyOf func(o object) index.Key
	// trackers are the registered change iterators (see graveyard.go).
	trackers trackers
}

// Positions of the reserved indexes, relative to the number of user indexes.
const (
	revisionOffset          = 0 // objects by revision
	graveyardOffset         = 1 // deleted objects by primary key
	graveyardRevisionOffset = 2 // deleted objects by delete revision
	reservedIndexes         = 3
)

func (m *tableMeta) revisionIndex() int { return len(m.indexNames) - reservedIndexes + revisionOffset }
func (m *tableMeta) graveyardIndex() int {
	return len(m.indexNames) - reservedIndexes + graveyardOffset
}
func (m *tableMeta) graveyardRevisionIndex() int {
	return len(m.indexNames) - reservedIndexes + graveyardRevisionOffset
}

// indexPos returns the position of the named index. Queries are built from
// the table's own Index values, so an unknown name is a programming error.
func (m *tableMeta) indexPos(name string) int {
	for i, n := range m.indexNames {
		if n == name {
			return i
		}
	}
	panic(fmt.Sprintf("statedb: table %q has no index %q; build queries from an Index passed to NewTable for this table", m.name, name))
}

// tableEntry is the state of one table in one snapshot. Committed entries are
// immutable and each is an allocation of its own, made at the commit that
// published it (tableEntry.committed); a WriteTxn works on a copy inside its
// pooled state.
//
// A committed entry refers to nothing but its own state: its trees, its
// initializers, its table. It never points into a WriteTxn, whose buffers
// are reused and whose committed root holds other tables' entries of the
// past. That is what keeps memory bounded by live data (package doc,
// "Memory depends on live data"): were an entry to point into the
// transaction that committed it, every kept entry would keep that
// transaction's whole root, and with it the entries of every other table
// as of then, and so on back through history.
type tableEntry struct {
	meta *tableMeta
	// indexes are the index trees by position (see tableMeta): trees[:n]
	// for a table of up to inlineTrees indexes, else an array of their own.
	// A tree is a root pointer and a size, held by value.
	indexes  []tree
	revision Revision
	// init is nil while no initializer was ever registered (the table is
	// initialized); committed, it is never changed (a WriteTxn that
	// registers or finishes an initializer works on a copy).
	init *tableInit
	// wt is set on the working copy inside a WriteTxn: reads then see the
	// transaction's uncommitted writes.
	wt    *txnTable
	trees [inlineTrees]tree
}

// inlineTrees is the number of index trees a table entry holds without an
// array of its own: a primary index, one secondary index and the three
// reserved ones. A commit of such a table allocates one entry and nothing
// more for its state.
const inlineTrees = 5

// tableInit is the initialization state of a table: the initializers not
// yet done, and the channel that closes when the last of them is.
type tableInit struct {
	pending []*initializer
	watch   chan struct{}
}

// initializer is one registration of RWTable.RegisterInitializer. Pending
// initializers are told apart by identity, so two of the same name are
// distinct.
type initializer struct{ name string }

func newTableEntry(m *tableMeta) *tableEntry {
	e := &tableEntry{meta: m}
	e.setIndexes(make([]tree, len(m.indexNames)))
	for i := range e.indexes {
		e.indexes[i] = newTree()
	}
	return e
}

// setIndexes makes e's trees a copy of trees: inline when they fit, else
// in a new array.
func (e *tableEntry) setIndexes(trees []tree) {
	if len(trees) <= inlineTrees {
		e.indexes = e.trees[:len(trees)]
		copy(e.indexes, trees)
		return
	}
	e.indexes = slices.Clone(trees)
}

// committed returns a new committed entry holding e's state: its trees (in
// an array of its own if they do not fit inline) and no WriteTxn.
func (e *tableEntry) committed() *tableEntry {
	c := &tableEntry{meta: e.meta, revision: e.revision, init: e.init}
	c.setIndexes(e.indexes)
	return c
}

// watchAll returns a channel that closes on any change to the table: the
// watch channel of the primary index's root, which every insert and delete
// replaces. For a nil entry (a table not in the snapshot) it is closed.
func (e *tableEntry) watchAll() <-chan struct{} {
	if e == nil {
		return closedWatch()
	}
	return e.snapshot(0).Watch()
}

// root returns the root node of index i for point lookups, including the
// uncommitted writes of a WriteTxn. Do not take watch channels from it:
// see snapshot.
func (e *tableEntry) root(i int) *treeNode {
	if e.wt != nil {
		if i == e.meta.revisionIndex() {
			e.wt.revFlush()
		}
		e.wt.flushIndex(i)
		if t := e.wt.txns[i]; t != nil {
			return t.Root()
		}
	}
	return e.indexes[i].Root()
}

// snapshot returns a root node of index i that stays unchanged while the
// caller iterates or watches, even if the WriteTxn it belongs to writes
// more: Freeze makes the nodes written so far immutable, so that later
// writes of the transaction copy them (and Commit closes their watch
// channels) instead of changing them in place. Every read that hands out a
// watch channel takes it from here: this keeps the watch-channel promise of
// the package doc for channels taken through a WriteTxn.
func (e *tableEntry) snapshot(i int) *treeNode {
	if e.wt != nil {
		if i == e.meta.revisionIndex() {
			e.wt.revFlush()
		}
		e.wt.flushIndex(i)
		if t := e.wt.txns[i]; t != nil {
			e.indexes[i] = t.Freeze()
		}
	}
	return e.indexes[i].Root()
}

func (e *tableEntry) numObjects() int {
	if e.wt != nil && e.wt.txns[0] != nil {
		e.snapshot(0)
	}
	return e.indexes[0].Len()
}

// table implements RWTable for objects of type Obj.
type table[Obj any] struct {
	*tableMeta
	primary   Indexer[Obj]
	secondary []Indexer[Obj]
	// appendKey holds, for each secondary index whose objects have at
	// most one key that it can append to a buffer (an LPMIndex with
	// Prefix), that function; nil elsewhere. A write builds such keys in
	// the transaction's buffers (table_write.go).
	appendKey []func(dst []byte, obj Obj) ([]byte, bool)
	// isPointer is set when Obj is a pointer type; only then can inserting
	// the stored object again be detected cheaply.
	isPointer bool
	// direct is set when Obj is pointer-shaped (see object).
	direct bool
}

// NewTable creates a table in db with a primary index and any number of
// secondary indexes, and returns it for writing; hand out ToTable() to
// readers.
//
// Table and index names follow the one name rule of the project: a
// lower-case letter, then up to 63 lower-case letters, digits, '-' and '_'
// ([a-z][a-z0-9_-]{0,63}). Errors, each naming the table: ErrInvalidTableName,
// ErrInvalidIndex (a nil index, primary not unique, missing FromObject or
// FromKey, bad or duplicate index name), ErrDuplicateTable.
func NewTable[Obj any](db *DB, name string, primary Indexer[Obj], secondary ...Indexer[Obj]) (RWTable[Obj], error) {
	if !names.Valid(name) {
		return nil, tableError(name, fmt.Errorf("%w: must match %s", ErrInvalidTableName, names.Pattern))
	}
	if primary == nil {
		return nil, tableError(name, fmt.Errorf("%w: primary index is nil", ErrInvalidIndex))
	}
	if !primary.isUnique() {
		return nil, tableError(name, fmt.Errorf("%w: primary index %q must be unique", ErrInvalidIndex, primary.indexName()))
	}
	if isLPM(primary) {
		return nil, tableError(name, fmt.Errorf("%w: primary index %q is an LPMIndex, which can only be a secondary index", ErrInvalidIndex, primary.indexName()))
	}
	t := &table[Obj]{
		tableMeta: &tableMeta{db: db, name: name},
		primary:   primary,
		secondary: secondary,
		isPointer: reflect.TypeFor[Obj]().Kind() == reflect.Pointer,
		direct:    pointerShaped[Obj](),
	}
	t.tableMeta.table = t
	t.tableMeta.primaryKeyOf = func(o object) index.Key { return primary.fromObject(t.obj(o)).First() }
	seen := map[string]bool{}
	for i, idx := range append([]Indexer[Obj]{primary}, secondary...) {
		if idx == nil {
			return nil, tableError(name, fmt.Errorf("%w: secondary index %d is nil", ErrInvalidIndex, i))
		}
		n := idx.indexName()
		if err := validateIndex(idx); err != nil {
			return nil, tableError(name, err)
		}
		if seen[n] {
			return nil, tableError(name, fmt.Errorf("%w: duplicate index name %q", ErrInvalidIndex, n))
		}
		seen[n] = true
		t.indexNames = append(t.indexNames, n)
		t.unique = append(t.unique, idx.isUnique())
		t.tracked = append(t.tracked, true)
		t.lpm = append(t.lpm, isLPM(idx))
		t.plain = append(t.plain, idx.isUnique() && !isLPM(idx))
		t.deferred = append(t.deferred, i > 0 && !idx.isUnique())
	}
	for _, idx := range secondary {
		var f func(dst []byte, obj Obj) ([]byte, bool)
		if a, ok := idx.(interface {
			keyAppender() func(dst []byte, obj Obj) ([]byte, bool)
		}); ok {
			f = a.keyAppender()
		}
		t.appendKey = append(t.appendKey, f)
	}
	// Reserved indexes: nobody watches them directly (LowerBoundWatch uses
	// the table-wide channel), so their channels are not tracked.
	t.indexNames = append(t.indexNames, RevisionIndex, "_graveyard", "_graveyard_revision")
	t.unique = append(t.unique, true, true, true)
	t.tracked = append(t.tracked, false, false, false)
	t.lpm = append(t.lpm, false, false, false)
	t.plain = append(t.plain, true, true, true)
	t.deferred = append(t.deferred, false, false, false)
	t.tableMeta.replayIndex = t.replayLog

	if err := db.registerTable(t.tableMeta); err != nil {
		return nil, err
	}
	return t, nil
}

func validateIndex[Obj any](idx Indexer[Obj]) error {
	n := idx.indexName()
	if !names.Valid(n) {
		if strings.HasPrefix(n, "_") {
			return fmt.Errorf("%w: index name %q: names starting with _ are reserved", ErrInvalidIndex, n)
		}
		return fmt.Errorf("%w: index name %q must match %s", ErrInvalidIndex, n, names.Pattern)
	}
	if v, ok := idx.(interface{ valid() error }); ok {
		if err := v.valid(); err != nil {
			return err
		}
	}
	return nil
}

// isLPM tells whether idx is an LPMIndex.
func isLPM[Obj any](idx Indexer[Obj]) bool {
	_, ok := idx.(interface{ isLPM() })
	return ok
}

func (m *tableMeta) Name() string     { return m.name }
func (m *tableMeta) meta() *tableMeta { return m }

// Indexes returns the names of the table's indexes, primary first, then the
// secondary indexes and the revision index.
func (m *tableMeta) Indexes() []string {
	return append([]string(nil), m.indexNames[:len(m.indexNames)-reservedIndexes+1]...)
}

// obj returns the Obj that o holds.
func (t *table[Obj]) obj(o object) Obj { return loadObject[Obj](t.direct, o) }

// ToTable returns the read-only view of the table.
func (t *table[Obj]) ToTable() Table[Obj] { return readOnly[Obj]{t} }

// readOnly hides the write methods of a table behind Table.
type readOnly[Obj any] struct{ Table[Obj] }

// primaryKey returns obj's single primary key.
func (t *table[Obj]) primaryKey(obj Obj) (index.Key, error) {
	ks := t.primary.fromObject(obj)
	if ks.Len() != 1 {
		return nil, tableError(t.name, fmt.Errorf("%w: index %q yielded %d keys", ErrPrimaryKey, t.indexNames[0], ks.Len()))
	}
	return ks.First(), nil
}

// PrimaryKey returns obj's key in the primary index.
func (t *table[Obj]) PrimaryKey(obj Obj) index.Key {
	return t.primary.fromObject(obj).First()
}

// indexer returns the definition of user index i (0 = primary).
func (t *table[Obj]) indexer(i int) Indexer[Obj] {
	if i == 0 {
		return t.primary
	}
	return t.secondary[i-1]
}
