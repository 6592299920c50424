// Package reflector fills a statedb table from a source of desired
// objects that can be listed and then watched, such as etcd or a
// Kubernetes API server: the writer at the start of the path
// source → table → reconciler → real system.
//
// A Reflector lists the source at one consistent revision and commits the
// whole list in one write transaction, marking the table's initializer done
// in the same transaction (so a reconciler prunes only against a complete
// table). It then watches the source from the listed revision: events are
// coalesced by key and committed in batches of at most Config.BatchSize
// objects, each at most Config.BatchInterval after its first event. When
// the watch is lost, or the source says a resync is needed (for example
// because the revision it watched from was compacted), it lists again and
// replaces: objects that are gone are deleted, changed ones written, and
// unchanged ones left alone, so their reconciliation status stays as it
// is. Objects are written through a reconciler.DesiredWriter, which makes
// every changed object Pending.
//
// A source speaks in events (Event): Put and Delete change one key, at a
// revision; Resync asks for a new list; Progress carries no change and
// says that every change up to its revision has been sent, which moves
// Revision along when the source's revision advanced without touching
// this table.
//
// Config.Filter drops objects before they are stored (caching only what
// the node needs); Config.Transform turns the source's value into the
// table's object. A value that Transform rejects is reported (health
// Degraded, naming the key and the error) and skipped; the table keeps the
// last good version of that key, and the rest of the batch applies.
//
// # Invariants
//
// No lost delete. Every key the reflector stored is remembered until it is
// deleted; a relist deletes exactly the remembered keys that the new list
// lacks, so a delete missed while the watch was down is still applied.
//
// Nothing old overrides the new. Events at or below the revision of the
// last list are ignored (a source may replay them after a reconnect), and
// within a batch the latest event of a key wins.
//
// Revision never claims too much. Revision reports R only once every
// change of the source up to R is committed to the table: after a list at
// R, after the commit of a batch whose latest event is at R, or after a
// Progress event at R (the source saying that it sent every change up to
// R) once every event received before it is committed. A progress lets a
// table whose objects did not change follow a source whose revision moved
// for other reasons (in etcd, every write anywhere in the cluster): a node
// running one reflector per table reports the least of their revisions as
// the desired state it has, and without progress a table that an apply did
// not touch would hold that back forever. A progress at or below the
// current revision is ignored.
//
// Only the goroutine running Run touches the reflector's state.
package reflector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	retry "github.com/steadystate/steadystate/internal/backoff"
	"github.com/steadystate/steadystate/internal/names"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
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
	// (Key and Value are unused). Revision reports it once every event
	// received before it is committed.
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
	Kind     EventKind
	Key      string // the source's key of the object
	Value    In     // for Put
	Revision uint64 // the source's revision of the change; for Progress, the revision reached
}

// Item is one object of a list.
type Item[In any] struct {
	Key   string
	Value In
}

// Source is where the desired objects come from.
type Source[In any] interface {
	// List returns every object at one consistent revision of the
	// source, and that revision.
	List(ctx context.Context) ([]Item[In], uint64, error)
	// Watch streams the changes after revision after, in order. The
	// channel closes when the watch is lost (the reflector then lists
	// again) or ctx ends. Between changes it may send Progress events,
	// each a promise that every change up to its revision was sent before
	// it: a source whose revision moves without a change of its own (one
	// revision shared by many tables) sends them so that the reflector's
	// Revision follows. A source without progress sends none.
	Watch(ctx context.Context, after uint64) (<-chan Event[In], error)
}

// Health is where the reflector reports its health; hive's cell.Health
// satisfies it.
type Health interface {
	OK(status string)
	Degraded(reason string, err error)
	Stopped(reason string)
}

// Metrics receives the reflector's measurements; it must be safe for
// concurrent use.
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
	// Rejected counts n values that Transform rejected.
	Rejected(reflector string, n int)
}

// NopMetrics discards every measurement.
type NopMetrics struct{}

func (NopMetrics) Events(string, int)                        {}
func (NopMetrics) BatchCommitted(string, int, time.Duration) {}
func (NopMetrics) Relisted(string, string)                   {}
func (NopMetrics) Rejected(string, int)                      {}

// Config configures a Reflector. Zero values mean the documented defaults.
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
	// an error. Required.
	Transform func(key string, v In) (Obj, error)
	// BatchSize is the most objects per write transaction. Default
	// DefaultBatchSize.
	BatchSize int
	// BatchInterval is the longest an event waits for its batch. Default
	// DefaultBatchInterval.
	BatchInterval time.Duration
	// RetryBackoffMin and RetryBackoffMax bound the wait between failed
	// lists or watches (the project's backoff). Defaults 100ms and 1m.
	RetryBackoffMin, RetryBackoffMax time.Duration
	Metrics                          Metrics      // default NopMetrics
	Health                           Health       // default none
	Logger                           *slog.Logger // default slog.Default()
}

// Defaults of Config.
const (
	DefaultBatchSize     = 1000
	DefaultBatchInterval = 50 * time.Millisecond
)

// ErrInvalidConfig is wrapped by New's error for a bad Config.
var ErrInvalidConfig = errors.New("invalid reflector config")

// Reflector fills a table from a Source; see the package doc.
type Reflector[In, Obj any] struct {
	db   *statedb.DB
	cfg  Config[In, Obj]
	init func(statedb.WriteTxn) // marks the table initialized; nil once done

	stored   map[string]Obj    // by source key: what the reflector stored
	rejected map[string]string // by source key: why its latest value was rejected
	rev      uint64            // revision of the latest list, received event or progress
	listRev  uint64            // revision of the latest list
	reached  atomic.Uint64     // the source revision the table reflects
	// rejectedNow is a copy of rejected for Rejected, as "KEY: ERROR" by key.
	rejectedNow atomic.Pointer[[]string]
}

// New validates cfg and registers an initializer of the table, done when
// the first list is committed. Call Run.
func New[In, Obj any](db *statedb.DB, cfg Config[In, Obj]) (*Reflector[In, Obj], error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if db == nil {
		bad("db is nil")
	}
	if err := names.Check("reflector", cfg.Name); err != nil {
		bad("%v", err)
	}
	if cfg.Source == nil {
		bad("Source is required")
	}
	if cfg.Writer.Table == nil || cfg.Writer.Equal == nil || cfg.Writer.SetObjectStatus == nil {
		bad("Writer needs Table, Equal and SetObjectStatus")
	}
	if cfg.Transform == nil {
		bad("Transform is required")
	}
	if cfg.BatchSize < 0 || cfg.BatchInterval < 0 || cfg.RetryBackoffMin < 0 || cfg.RetryBackoffMax < 0 {
		bad("BatchSize, BatchInterval and the backoffs must not be negative")
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w %q: %w", ErrInvalidConfig, cfg.Name, errors.Join(errs...))
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.BatchInterval == 0 {
		cfg.BatchInterval = DefaultBatchInterval
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NopMetrics{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Logger = cfg.Logger.With("reflector", cfg.Name)
	r := &Reflector[In, Obj]{db: db, cfg: cfg, stored: map[string]Obj{}, rejected: map[string]string{}}
	wtxn := db.WriteTxn(cfg.Writer.Table)
	r.init = cfg.Writer.Table.RegisterInitializer(wtxn, "reflector-"+cfg.Name)
	wtxn.Commit()
	return r, nil
}

// minWatchLife is how long a watch must last for the next relist to come
// without a backoff.
const minWatchLife = time.Second

// Run lists and watches the source until ctx ends; it returns nil then.
func (r *Reflector[In, Obj]) Run(ctx context.Context) error {
	backoff := retry.Backoff{Min: r.cfg.RetryBackoffMin, Max: r.cfg.RetryBackoffMax}
	reason := "initial"
	failures := 0
	quick := 0 // watches in a row that ended within minWatchLife
	for ctx.Err() == nil {
		err := r.relist(ctx, reason)
		if err == nil {
			started := time.Now()
			reason, err = r.watch(ctx)
			switch {
			case err != nil:
			case time.Since(started) >= minWatchLife:
				failures, quick = 0, 0 // a watch that lasted: the source is fine
			case quick < 2:
				quick++ // a resync right after a list happens
			default:
				// A watch that ends at once, again and again, would make
				// a relist loop: back off as after a failure.
				failures++
				if !sleep(ctx, backoff.Duration(failures)) {
					break
				}
			}
		}
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			failures++
			r.degraded(fmt.Sprintf("source: %v", err), err)
			r.cfg.Logger.Warn("Source failed", "error", err, "attempt", failures)
			if !sleep(ctx, backoff.Duration(failures)) {
				break
			}
			if reason == "initial" && r.init == nil {
				reason = "watch-lost"
			}
		}
	}
	if r.cfg.Health != nil {
		r.cfg.Health.Stopped("reflector stopped")
	}
	return nil
}

// relist lists the source and replaces the table's objects with the list.
func (r *Reflector[In, Obj]) relist(ctx context.Context, reason string) error {
	items, rev, err := r.cfg.Source.List(ctx)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	r.cfg.Metrics.Relisted(r.cfg.Name, reason)
	start := time.Now()
	batch := make(map[string]Event[In], len(items)+len(r.stored))
	for _, it := range items {
		batch[it.Key] = Event[In]{Kind: Put, Key: it.Key, Value: it.Value, Revision: rev}
	}
	for key := range r.stored {
		if _, ok := batch[key]; !ok {
			batch[key] = Event[In]{Kind: Delete, Key: key, Revision: rev}
		}
	}
	// Keys rejected earlier and gone now are no longer a problem.
	for key := range r.rejected {
		if _, ok := batch[key]; !ok {
			delete(r.rejected, key)
		}
	}
	r.rev, r.listRev = rev, rev
	r.commit(batch, start, true)
	if reason != "initial" {
		r.cfg.Logger.Info("Relisted the source", "reason", reason, "objects", len(items), "revision", rev)
	}
	return nil
}

// watch applies the source's changes after r.rev in batches until the
// watch is lost (it returns the reason to list again) or fails.
func (r *Reflector[In, Obj]) watch(ctx context.Context) (string, error) {
	// The watch ends with this call: a source that would go on after a
	// Resync, or after the reflector stopped reading, is told to stop.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := r.cfg.Source.Watch(wctx, r.rev)
	if err != nil {
		return "watch-lost", fmt.Errorf("watch: %w", err)
	}
	batch := map[string]Event[In]{}
	var first time.Time
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	flush := func() {
		if len(batch) > 0 {
			r.commit(batch, first, false)
			clear(batch)
		}
		timer.Stop()
	}
	for {
		var timerC <-chan time.Time
		if len(batch) > 0 {
			timerC = timer.C
		}
		select {
		case <-ctx.Done():
			return "", nil
		case <-timerC:
			flush()
		case ev, ok := <-events:
			if !ok {
				flush()
				return "watch-lost", nil
			}
			if ev.Kind == Progress {
				r.progress(ev.Revision, len(batch) > 0)
				continue
			}
			r.cfg.Metrics.Events(r.cfg.Name, 1)
			switch {
			case ev.Kind == Resync:
				flush()
				return "resync", nil
			case ev.Revision <= r.listRev:
				continue // replayed from before the list
			case ev.Kind != Put && ev.Kind != Delete:
				r.cfg.Logger.Warn("Ignored an event of unknown kind", "kind", ev.Kind, "key", ev.Key)
				continue
			}
			if len(batch) == 0 {
				first = time.Now()
				timer.Reset(r.cfg.BatchInterval)
			}
			batch[ev.Key] = ev
			r.rev = max(r.rev, ev.Revision)
			if len(batch) >= r.cfg.BatchSize {
				flush()
			}
		}
	}
}

// progress takes the source's word that every change up to rev was sent:
// with a batch pending, that batch's commit reports rev; with none, the
// table already holds every change received, and rev is reported now. A
// progress at or below the current revision (at or below the list's
// among them) says nothing new.
func (r *Reflector[In, Obj]) progress(rev uint64, pending bool) {
	if rev <= r.rev {
		return
	}
	r.rev = rev
	if !pending {
		r.reached.Store(rev)
		r.reportHealth()
	}
}

// commit writes a batch of the latest event per key in one write
// transaction; with replace (a relist), the first commit also marks the
// table initialized.
func (r *Reflector[In, Obj]) commit(batch map[string]Event[In], since time.Time, replace bool) {
	w := r.cfg.Writer
	wtxn := r.db.WriteTxn(w.Table)
	defer wtxn.Abort()
	written, rejectedNow := 0, 0
	for key, ev := range batch {
		keep := ev.Kind == Put && (r.cfg.Filter == nil || r.cfg.Filter(key, ev.Value))
		if !keep {
			delete(r.rejected, key)
			if old, ok := r.stored[key]; ok {
				if _, err := w.Delete(wtxn, old); err != nil {
					r.cfg.Logger.Error("Delete failed", "key", key, "error", err)
					continue
				}
				delete(r.stored, key)
				written++
			}
			continue
		}
		obj, err := r.cfg.Transform(key, ev.Value)
		if err == nil {
			if old, ok := r.stored[key]; ok && string(w.Table.PrimaryKey(old)) != string(w.Table.PrimaryKey(obj)) {
				// The key now names another object: drop the old one.
				if _, err = w.Delete(wtxn, old); err == nil {
					delete(r.stored, key)
				}
			}
		}
		if err == nil {
			var wrote bool
			if wrote, err = w.Upsert(wtxn, obj); err == nil {
				r.stored[key] = obj
				delete(r.rejected, key)
				if wrote {
					written++
				}
				continue
			}
		}
		// Rejected: the last good version (if any) stays.
		r.rejected[key] = err.Error()
		rejectedNow++
		r.cfg.Logger.Warn("Rejected an object of the source; its last good version stays", "key", key, "error", err)
	}
	if replace && r.init != nil {
		r.init(wtxn)
		r.init = nil
	}
	wtxn.Commit()
	r.reached.Store(r.rev)
	if rejectedNow > 0 {
		r.cfg.Metrics.Rejected(r.cfg.Name, rejectedNow)
	}
	r.cfg.Metrics.BatchCommitted(r.cfg.Name, len(batch), time.Since(since))
	r.reportHealth()
}

// Revision returns the source revision that the table reflects: every
// change of the source up to it is committed to the table (0 before the
// first list). It moves with each commit, and with each Progress event of
// the source (see the package doc), so it may pass the revision of the
// table's latest change. Safe for concurrent use. A node reports it as the
// revision it reached, once its reconcilers have caught up with the table.
func (r *Reflector[In, Obj]) Revision() uint64 { return r.reached.Load() }

// Rejected returns the source's keys whose latest value Transform
// rejected, with why, as "KEY: ERROR" in key order (the table keeps the last
// good version of each, if any). A node counts them as not applied. Safe
// for concurrent use.
func (r *Reflector[In, Obj]) Rejected() []string {
	if p := r.rejectedNow.Load(); p != nil {
		return slices.Clone(*p)
	}
	return nil
}

// reportHealth reports OK, or Degraded naming the rejected keys, and
// updates what Rejected returns.
func (r *Reflector[In, Obj]) reportHealth() {
	now := make([]string, 0, len(r.rejected))
	for _, k := range slices.Sorted(maps.Keys(r.rejected)) {
		now = append(now, k+": "+r.rejected[k])
	}
	r.rejectedNow.Store(&now)
	if r.cfg.Health == nil {
		return
	}
	if len(r.rejected) == 0 {
		r.cfg.Health.OK(fmt.Sprintf("%d objects at revision %d", len(r.stored), r.rev))
		return
	}
	keys := slices.Sorted(maps.Keys(r.rejected))
	shown := keys[:min(len(keys), 10)]
	reason := fmt.Sprintf("%d objects rejected:", len(keys))
	for _, k := range shown {
		reason += fmt.Sprintf(" %s: %s;", k, r.rejected[k])
	}
	r.cfg.Health.Degraded(reason[:len(reason)-1], fmt.Errorf("%s: %s", shown[0], r.rejected[shown[0]]))
}

func (r *Reflector[In, Obj]) degraded(reason string, err error) {
	if r.cfg.Health != nil {
		r.cfg.Health.Degraded(reason, err)
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
