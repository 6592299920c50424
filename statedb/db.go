package statedb

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
)

// DB is an in-memory database of typed tables. Create it with New and add
// tables with NewTable. All methods are safe for concurrent use.
type DB struct {
	// mu serializes the publication of new roots and table registration.
	// It is always taken last, after any table locks (see write_txn.go).
	mu     sync.Mutex
	root   atomic.Pointer[dbRoot]
	tables []*tableMeta // guarded by mu; index == tableMeta.pos
	opts   options

	// droppedTxns counts WriteTxns garbage collected without Commit or
	// Abort (see txnGuard).
	droppedTxns atomic.Int64

	id string // see ID
}

// dbRoot is one consistent state of every table: the ReadTxn. A new root is
// built on each commit and published with one atomic store. It holds the
// committed entries by pointer, so that building it copies a word per
// table; a commit allocates a new entry for each table it changed only.
type dbRoot []*tableEntry

// Option configures a DB.
type Option func(*options)

type options struct {
	logger  *slog.Logger
	metrics Metrics
}

func (o *options) metricsEnabled() bool {
	_, nop := o.metrics.(NopMetrics)
	return !nop
}

// WithLogger sets the logger for problems found at run time, such as a
// WriteTxn dropped without Commit or Abort. The default is slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}

// WithMetrics sets where the DB reports its metrics. The default reports
// nowhere.
func WithMetrics(m Metrics) Option {
	return func(o *options) { o.metrics = m }
}

// New returns an empty database.
func New(opts ...Option) *DB {
	db := &DB{id: newID()}
	db.opts = options{logger: slog.Default(), metrics: NopMetrics{}}
	for _, o := range opts {
		o(&db.opts)
	}
	db.root.Store(&dbRoot{})
	return db
}

// ID returns the database's identity: 16 random hex digits chosen by New,
// so that two databases (a program and the same program restarted) never
// share one. Revisions are only comparable within one ID: a client of the
// HTTP API that sees another ID (the Statedb-Id header) talks to a new
// database whose revisions started again.
func (db *DB) ID() string { return db.id }

// newID returns 16 random hex digits.
func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// ReadTxn returns a snapshot of every table. It is one atomic load and does
// not allocate; the snapshot never changes.
func (db *DB) ReadTxn() ReadTxn {
	return db.root.Load()
}

// Tables returns the metadata of every table, in registration order.
func (db *DB) Tables() []TableMeta {
	db.mu.Lock()
	defer db.mu.Unlock()
	out := make([]TableMeta, len(db.tables))
	for i, t := range db.tables {
		out[i] = t.table
	}
	return out
}

func (r *dbRoot) tableEntry(meta TableMeta) *tableEntry {
	m := meta.meta()
	if m.pos >= len(*r) {
		return nil
	}
	e := (*r)[m.pos]
	if e.meta != m {
		panic(fmt.Sprintf("statedb: table %q read with a ReadTxn of another DB; take the ReadTxn from the DB the table was created in", m.name))
	}
	return e
}

// registerTable adds a table's metadata and its empty state to the DB.
func (db *DB) registerTable(m *tableMeta) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	for _, t := range db.tables {
		if t.name == m.name {
			return tableError(m.name, fmt.Errorf("%w: a table with this name already exists", ErrDuplicateTable))
		}
	}
	m.pos = len(db.tables)
	db.tables = append(db.tables, m)
	old := *db.root.Load()
	root := make(dbRoot, len(old)+1)
	copy(root, old)
	root[m.pos] = newTableEntry(m)
	db.root.Store(&root)
	db.opts.metrics.TableObjects(m.name, 0)
	return nil
}
