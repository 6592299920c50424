package reflector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/steadystate/steadystate/reconciler"
)

// EventKind is what an Event says.
type EventKind uint8

const (
	// Put: the key has this value (created or changed).
	Put EventKind = iota + 1
	// Delete: the key is gone.
	Delete
	// Resync: the source cannot go on from where it is (for example, the
	// revision it watched from was compacted); list again.
	Resync
	// Progress: the source has sent every change up to Event.Revision
	// (Table, Key and Value are unused). The pending events up to it are
	// committed at once, and Revision reports it.
	Progress
)

func (k EventKind) String() string {
	switch k {
	case Put:
		return "put"
	case Delete:
		return "delete"
	case Resync:
		return "resync"
	case Progress:
		return "progress"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is one change of the source.
type Event[In any] struct {
	Kind EventKind
	// Table names the table of a multi-table source: a Multi gives the
	// event to its Into of that name. A Reflector (one table) ignores it.
	Table    string
	Key      string // the source's key of the object (within Table)
	Value    In     // for Put
	Revision uint64 // the source's revision of the change; for Progress, the revision reached
}

// Item is one object of a list.
type Item[In any] struct {
	Table string // as Event.Table
	Key   string
	Value In
	// Revision is the revision of the key's last change, if the source
	// knows it (0 otherwise). Where several keys hold objects with one
	// primary key, the latest by Revision (then by key) is written.
	Revision uint64
}

// Source is where the desired objects come from.
//
// Its revisions order its changes; one revision may hold many events.
// Watch sends the events of one revision one after the other, without a
// pause of BatchInterval between them, or marks their end with a Progress
// at that revision: the reflector takes a later revision's event, a
// Progress, or BatchInterval of quiet as the end of a revision, and never
// commits a part of one.
type Source[In any] interface {
	// List returns every object at one consistent revision of the
	// source, and that revision.
	List(ctx context.Context) ([]Item[In], uint64, error)
	// Watch streams the changes after revision after, in revision order.
	// The channel closes when the watch is lost (the reflector then lists
	// again) or ctx ends. It may send Progress events, each a promise
	// that every change up to its revision was sent before it; a source
	// that sends one after each group of whole revisions gets them
	// committed at once, without waiting for BatchInterval.
	Watch(ctx context.Context, after uint64) (<-chan Event[In], error)
}

// RevisionMarker is a Source that may say its Watch ends every revision
// it sends with a Progress (at that revision or a later one) before it
// waits for more. The reflector then takes only a Progress or a later
// revision's event as the end of a revision, never BatchInterval of
// quiet: a source slowed down within a revision (its process starved of
// CPU for longer than BatchInterval) never has part of a revision
// committed as whole. The file source and the etcd source mark their
// revisions.
type RevisionMarker interface {
	MarksRevisions() bool
}

// Health is where the reflector reports its health; hive's cell.Health
// satisfies it.
type Health = reconciler.Health

// Metrics receives the reflector's measurements; it must be safe for
// concurrent use. An implementation embeds NopMetrics, so that a method
// added later does not break it.
type Metrics interface {
	// Events counts n events received from the source: puts, deletes and
	// resyncs (Progress events are not counted).
	Events(reflector string, n int)
	// BatchCommitted is one committed batch of n objects; lag is how long
	// its oldest event waited.
	BatchCommitted(reflector string, n int, lag time.Duration)
	// Relisted is one list of the source, with why: "initial",
	// "watch-lost" or "resync".
	Relisted(reflector, reason string)
	// Rejected counts n values that Filter or Transform rejected.
	Rejected(reflector string, n int)
}

// NopMetrics discards every measurement.
type NopMetrics struct{}

func (NopMetrics) Events(string, int)                        {}
func (NopMetrics) BatchCommitted(string, int, time.Duration) {}
func (NopMetrics) Relisted(string, string)                   {}
func (NopMetrics) Rejected(string, int)                      {}

// Rejection is a source key whose latest value was rejected, and why.
type Rejection struct {
	Table string // the Into's name ("" for a Reflector)
	Key   string
	Error string
}

// ErrInvalidConfig is wrapped by New's and NewMulti's error for a bad
// config.
var ErrInvalidConfig = errors.New("invalid reflector config")

// Defaults of Config and MultiConfig.
const (
	DefaultBatchSize     = 1000
	DefaultBatchInterval = 50 * time.Millisecond
)

// Config configures a Reflector: one table. Zero values mean the
// documented defaults.
type Config[In, Obj any] struct {
	// Name is used in health, metrics and logs (the name rule of tables).
	// Required.
	Name string
	// Source is listed and watched. Required.
	Source Source[In]
	// Writer writes the objects into its table: unchanged objects are
	// left alone, changed ones made Pending. Required (Table, Equal and
	// SetObjectStatus).
	Writer reconciler.DesiredWriter[Obj]
	// Filter, if set, keeps only the values for which it returns true; a
	// value that stops passing it is deleted from the table like a
	// deleted key.
	Filter func(key string, v In) bool
	// Transform turns a value into the table's object, or rejects it with
	// an error. It must return a new object on each call (the reflector
	// calls it again for a value it kept, when that value's object must be
	// written again). Required.
	//
	// Filter and Transform are called one at a time and in the source's
	// order, but in a first list into an empty table (a start's) not
	// necessarily on Run's goroutine: a run of 2,048 or more values is
	// prepared on a goroutine of its own, up to four chunks of 256 ahead
	// of the writes, so at the same time as the Writer's callbacks and
	// the table's index functions, and possibly for values of a commit
	// that then fails (a panic in an index rolls it back).
	Transform func(key string, v In) (Obj, error)
	// BatchSize is about the most objects per write transaction: a
	// batch of whole revisions is committed once it holds BatchSize
	// events (one revision is never split, so a larger revision makes a
	// larger batch). Default DefaultBatchSize.
	BatchSize int
	// BatchInterval is the longest an event of a whole revision waits for
	// its batch, and how long a source must be quiet after its last event
	// for that event's revision to count as whole (see the package doc).
	// Default DefaultBatchInterval.
	BatchInterval time.Duration
	// RetryBackoffMin and RetryBackoffMax bound the wait between failed
	// lists or watches (the project's backoff). Defaults 100ms and 1m.
	RetryBackoffMin, RetryBackoffMax time.Duration
	Metrics                          Metrics      // default NopMetrics
	Health                           Health       // default none
	Logger                           *slog.Logger // default slog.Default()
	// Idle, if set, lets the reflector enter the keys of a first list
	// into empty tables (a program's start) in its memory only once it is
	// closed: that list is committed without that work, which then runs
	// in the background after Idle closes (a program closes it once its
	// start is done, or when it stops), or at once when the next change
	// or list needs it. Without Idle, it runs in the background right
	// after the commit.
	Idle <-chan struct{}
}

// MultiConfig configures a Multi: several tables filled from one source.
// Its fields mean what Config's do.
type MultiConfig[In any] struct {
	Name   string     // required
	Source Source[In] // required: its events and items name their Table
	// Tables says how each table is filled: Into values, one per table,
	// with distinct names and distinct statedb tables. At least one.
	Tables                           []TableSpec[In]
	BatchSize                        int
	BatchInterval                    time.Duration
	RetryBackoffMin, RetryBackoffMax time.Duration
	Metrics                          Metrics
	Health                           Health
	Logger                           *slog.Logger
	Idle                             <-chan struct{}
}

// TableSpec is one table of a MultiConfig: an Into.
type TableSpec[In any] interface {
	newFill(log *slog.Logger, idle <-chan struct{}) (filler[In], error)
}

// Into says how a Multi fills one table from the source's events and
// items whose Table is Table. Writer, Filter and Transform mean what
// Config's do.
type Into[In, Obj any] struct {
	Table     string // the source's name of the table; required
	Writer    reconciler.DesiredWriter[Obj]
	Filter    func(key string, v In) bool
	Transform func(key string, v In) (Obj, error)
}
