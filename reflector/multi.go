package reflector

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/steadystate/steadystate/internal/backoff"
	"github.com/steadystate/steadystate/statedb"
)

// Multi fills several tables from one source, committing each of the
// source's revisions to all of them in one write transaction; see the
// package doc.
type Multi[In any] struct {
	db     *statedb.DB
	cfg    MultiConfig[In]
	fills  []filler[In]
	byName map[string]filler[In]
	metas  []statedb.TableMeta
	single bool // a Reflector's: every event and item goes to fills[0]
	marked bool // the source marks the end of each revision (RevisionMarker)

	// Run's state.
	lists   int // lists committed
	pend    pending[In]
	unknown map[string]bool // tables named by the source that no Into fills (warned once)

	reached     atomic.Uint64 // the source revision the tables reflect
	mu          sync.Mutex
	moved       chan struct{} // closed when reached moves
	rejectedNow atomic.Pointer[[]Rejection]
}

// NewMulti validates cfg and registers an initializer of each table, done
// when the first list is committed. Call Run.
func NewMulti[In any](db *statedb.DB, cfg MultiConfig[In]) (*Multi[In], error) {
	return newMulti(db, cfg, false)
}

func newMulti[In any](db *statedb.DB, cfg MultiConfig[In], single bool) (*Multi[In], error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if db == nil {
		bad("db is nil")
	}
	if err := checkName(cfg.Name); err != nil {
		bad("%v", err)
	}
	if cfg.Source == nil {
		bad("Source is required")
	}
	if len(cfg.Tables) == 0 {
		bad("Tables: give at least one Into")
	}
	if cfg.BatchSize < 0 || cfg.BatchInterval < 0 || cfg.RetryBackoffMin < 0 || cfg.RetryBackoffMax < 0 {
		bad("BatchSize, BatchInterval and the backoffs must not be negative")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Logger = cfg.Logger.With("reflector", cfg.Name)
	m := &Multi[In]{db: db, cfg: cfg, byName: map[string]filler[In]{}, single: single, moved: make(chan struct{})}
	if rm, ok := cfg.Source.(RevisionMarker); ok {
		m.marked = rm.MarksRevisions()
	}
	seen := map[statedb.TableMeta]string{}
	for _, spec := range cfg.Tables {
		if spec == nil {
			bad("Tables: a nil entry")
			continue
		}
		f, err := spec.newFill(cfg.Logger, cfg.Idle)
		if err != nil {
			bad("%v", err)
			continue
		}
		if _, dup := m.byName[f.name()]; dup {
			bad("table %q: named twice", f.name())
			continue
		}
		if other, dup := seen[f.meta()]; dup {
			bad("table %q: its statedb table is also %q's", f.name(), other)
			continue
		}
		seen[f.meta()] = f.name()
		m.byName[f.name()] = f
		m.fills = append(m.fills, f)
		m.metas = append(m.metas, f.meta())
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w %q: %w", ErrInvalidConfig, cfg.Name, errors.Join(errs...))
	}
	m.cfg.BatchSize = cmp.Or(cfg.BatchSize, DefaultBatchSize)
	m.cfg.BatchInterval = cmp.Or(cfg.BatchInterval, DefaultBatchInterval)
	if cfg.Metrics == nil {
		m.cfg.Metrics = NopMetrics{}
	}
	for _, f := range m.fills {
		f.register(db, cfg.Name)
	}
	return m, nil
}

// minWatchLife is how long a watch must last for the next relist to come
// without a backoff.
const minWatchLife = time.Second

// Run lists and watches the source until ctx ends; it returns nil then. A
// panic of user code inside a commit (other than Filter's and
// Transform's, which reject the value) propagates, after the commit and
// the reflector's memory were rolled back: a later Run starts with a list.
func (m *Multi[In]) Run(ctx context.Context) error {
	// The maps a first list deferred are made before Run returns: no
	// goroutine outlives it, waiting for Idle.
	defer func() {
		for _, f := range m.fills {
			f.settle()
		}
	}()
	wait := backoff.Backoff{Min: m.cfg.RetryBackoffMin, Max: m.cfg.RetryBackoffMax}
	reason := "initial"
	if m.listed() {
		reason = "watch-lost"
	}
	failures := 0
	quick := 0 // watches in a row that ended within minWatchLife
	if m.cfg.Health != nil && !m.listed() {
		// Running, nothing wrong yet: a failed list says Degraded.
		m.cfg.Health.OK("listing the source")
	}
	for ctx.Err() == nil {
		err := m.relist(ctx, reason)
		if err == nil {
			started := time.Now()
			reason, err = m.watch(ctx)
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
				if !sleep(ctx, wait.Duration(failures)) {
					break
				}
			}
		}
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			failures++
			m.degraded(fmt.Sprintf("source: %v", err), err)
			m.cfg.Logger.Warn("Source failed", "error", err, "attempt", failures)
			if !sleep(ctx, wait.Duration(failures)) {
				break
			}
			if reason == "initial" && m.listed() {
				reason = "watch-lost"
			}
		}
	}
	if m.cfg.Health != nil {
		m.cfg.Health.Stopped("reflector stopped")
	}
	return nil
}

// listed tells whether a list was committed (the tables are initialized).
func (m *Multi[In]) listed() bool { return m.lists > 0 }

// relist lists the source and replaces the tables' objects with the list,
// in one commit at the list's revision.
func (m *Multi[In]) relist(ctx context.Context, reason string) error {
	items, rev, err := m.cfg.Source.List(ctx)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	m.cfg.Metrics.Relisted(m.cfg.Name, reason)
	start := time.Now()
	evs := m.listEvents(items, rev)
	m.pend.reset(rev)
	m.commit(evs, start, true)
	m.lists++
	// The tables hold the list: its revision is the one reached, lower
	// than before if the source went back (a restored backup, a new
	// cluster).
	m.setRevision(rev)
	if reason != "initial" {
		m.cfg.Logger.Info("Relisted the source", "reason", reason, "objects", len(items), "revision", rev)
	}
	return nil
}

// listEvents returns the events that make the tables hold items, a list
// at revision rev: Deletes of the keys the tables hold that items lack,
// then a Put of each key's latest item (the one of highest revision, the
// last of those in items' order), in revision order (the latest write of a
// primary key wins): in table and key order when items are of one
// revision, else each revision's in key order. It sorts items; a list
// already in table and key order, all of one revision (a file's), is only
// checked, not sorted, nor does it need a map of its keys.
func (m *Multi[In]) listEvents(items []Item[In], rev uint64) []Event[In] {
	byKey := func(a, b Item[In]) int {
		return cmp.Or(cmp.Compare(m.tableOf(a.Table), m.tableOf(b.Table)), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Revision, b.Revision))
	}
	if !slices.IsSortedFunc(items, byKey) {
		slices.SortStableFunc(items, byKey)
	}
	// The latest of each key: the last of its run. Compacted in place,
	// and only from the first key listed twice: before it, each item is
	// where it stays (a copy of 60,000 items onto themselves cost a start
	// their write barriers).
	latest := items[:0]
	oneRevision := true
	for i := range items {
		it := &items[i]
		if i+1 < len(items) && m.tableOf(items[i+1].Table) == m.tableOf(it.Table) && items[i+1].Key == it.Key {
			continue
		}
		oneRevision = oneRevision && (len(latest) == 0 || it.Revision == latest[0].Revision)
		if len(latest) == i {
			latest = latest[:i+1]
		} else {
			latest = append(latest, *it)
		}
	}
	listed := func(table, key string) bool {
		_, found := slices.BinarySearchFunc(latest, tableKey{table, key}, func(it Item[In], k tableKey) int {
			return cmp.Or(cmp.Compare(m.tableOf(it.Table), k.table), cmp.Compare(it.Key, k.key))
		})
		return found
	}
	var evs []Event[In]
	for _, f := range m.fills {
		for key := range f.known() {
			if !listed(f.name(), key) {
				evs = append(evs, Event[In]{Kind: Delete, Table: f.name(), Key: key, Revision: rev})
			}
		}
	}
	if !oneRevision {
		slices.SortStableFunc(latest, func(a, b Item[In]) int {
			return cmp.Or(cmp.Compare(a.Revision, b.Revision), cmp.Compare(a.Key, b.Key))
		})
	}
	evs = slices.Grow(evs, len(latest))
	for _, it := range latest {
		evs = append(evs, Event[In]{Kind: Put, Table: it.Table, Key: it.Key, Value: it.Value, Revision: rev})
	}
	return evs
}

// tableOf is the name of the fill an event or item of table goes to.
func (m *Multi[In]) tableOf(table string) string {
	if m.single {
		return m.fills[0].name()
	}
	return table
}

// watch applies the source's changes after the list in batches until the
// watch is lost (it returns the reason to list again) or fails.
func (m *Multi[In]) watch(ctx context.Context) (string, error) {
	// The watch ends with this call: a source that would go on after a
	// Resync, or after the reflector stopped reading, is told to stop.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := m.cfg.Source.Watch(wctx, m.pend.complete)
	if err != nil {
		return "watch-lost", fmt.Errorf("watch: %w", err)
	}
	interval := m.cfg.BatchInterval
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	armed := false
	rearm := func() {
		timer.Stop()
		d, ok := m.pend.deadline(interval, !m.marked)
		if armed = ok; ok {
			timer.Reset(time.Until(d))
		}
	}
	// handle takes one event of the watch; it returns the reason to list
	// again, or "" to go on.
	handle := func(ev Event[In], ok bool) string {
		if !ok {
			m.flush()
			m.advance()
			return "watch-lost"
		}
		switch ev.Kind {
		case Progress:
			m.pend.progress(ev.Revision)
			m.flush()
			m.advance()
			rearm()
			return ""
		case Resync:
			m.cfg.Metrics.Events(m.cfg.Name, 1)
			m.flush()
			m.advance()
			return "resync"
		case Put, Delete:
			m.cfg.Metrics.Events(m.cfg.Name, 1)
		default:
			m.cfg.Logger.Warn("Ignored an event of unknown kind", "kind", ev.Kind, "key", ev.Key)
			return ""
		}
		switch m.pend.add(ev, time.Now()) {
		case stale:
			return "" // replayed, or older than what came
		case late:
			// The source paused within a revision for longer than
			// BatchInterval, against its contract, and part of the
			// revision was taken as whole: list again rather than lose
			// the rest.
			m.cfg.Logger.Warn("The source paused within a revision for longer than the batch interval; listing again",
				"revision", ev.Revision, "interval", interval)
			m.flush()
			m.advance()
			return "resync"
		}
		if m.pend.ready >= m.cfg.BatchSize {
			m.flush()
		}
		m.advance()
		rearm()
		return ""
	}
	for {
		var timerC <-chan time.Time
		if armed {
			timerC = timer.C
		}
		select {
		case <-ctx.Done():
			return "", nil
		case <-timerC:
			armed = false
			// An event ready at the same time goes first: the timer
			// may have been set while a commit held the reflector.
			select {
			case ev, ok := <-events:
				if reason := handle(ev, ok); reason != "" {
					return reason, nil
				}
				rearm()
				continue
			default:
			}
			now := time.Now()
			if !m.marked {
				m.pend.expire(now, interval)
			}
			if m.pend.due(now, interval) {
				m.flush()
			}
			m.advance()
			rearm()
		case ev, ok := <-events:
			if reason := handle(ev, ok); reason != "" {
				return reason, nil
			}
		}
	}
}

// flush commits the events of whole revisions.
func (m *Multi[In]) flush() {
	if evs, since := m.pend.take(); len(evs) > 0 {
		start := time.Now()
		m.commit(evs, since, false)
		m.pend.busy(time.Since(start))
	}
}

// advance reports the revision known whole once nothing of it is pending.
func (m *Multi[In]) advance() {
	if m.pend.ready == 0 {
		m.setReached(m.pend.complete)
	}
}

// commit writes a batch (the latest event per key) to the tables in one
// write transaction; with initial (a list), it also marks every table
// initialized. If anything in it panics, the transaction is aborted and
// every fill's memory rolled back before the panic goes on.
func (m *Multi[In]) commit(evs []Event[In], since time.Time, initial bool) {
	m.begin(evs, initial)
	wtxn := m.db.WriteTxn(m.metas[0], m.metas[1:]...)
	committed := false
	defer func() {
		if !committed {
			wtxn.Abort()
			for _, f := range m.fills {
				f.rollback()
			}
		}
	}()
	written, rejectedNow := 0, 0
	for i := 0; i < len(evs); {
		ev := evs[i]
		f := m.fillOf(ev.Table)
		if f == nil {
			i++
			continue
		}
		if ev.Kind == Put && initial {
			// A list's Puts of one table go together (see putRun).
			j := i + 1
			for j < len(evs) && evs[j].Kind == Put && (evs[j].Table == ev.Table || m.fillOf(evs[j].Table) == f) {
				j++
			}
			n, rejected := f.putRun(wtxn, evs[i:j])
			written += n
			rejectedNow += rejected
			i = j
			continue
		}
		switch ev.Kind {
		case Put:
			n, rejected := f.put(wtxn, ev.Key, ev.Value)
			written += n
			if rejected {
				rejectedNow++
			}
		case Delete:
			written += f.del(wtxn, ev.Key)
		}
		i++
	}
	if initial {
		for _, f := range m.fills {
			f.initialized(wtxn)
		}
	}
	wtxn.Commit()
	committed = true
	for _, f := range m.fills {
		f.keep()
	}
	if rejectedNow > 0 {
		m.cfg.Metrics.Rejected(m.cfg.Name, rejectedNow)
	}
	m.cfg.Metrics.BatchCommitted(m.cfg.Name, len(evs), time.Since(since))
	m.reportHealth()
}

// begin begins a commit of evs in every fill, each told how many Puts of
// evs it takes: what an empty fill sizes its maps for. (A list of 50,000
// routes, 10,000 rules and one sysctl sized each table's for a third of
// them: the routes' maps grew twice, and the sysctl's kept room for
// 20,000 for good.) Small batches are not counted: the maps grow.
func (m *Multi[In]) begin(evs []Event[In], initial bool) {
	if m.single {
		m.fills[0].begin(len(evs), initial)
		return
	}
	if len(evs) < shrinkAbove {
		for _, f := range m.fills {
			f.begin(0, initial)
		}
		return
	}
	at := make(map[string]int, len(m.fills))
	for i, f := range m.fills {
		at[f.name()] = i
	}
	n := make([]int, len(m.fills))
	for _, ev := range evs {
		if i, ok := at[ev.Table]; ok && ev.Kind == Put {
			n[i]++
		}
	}
	for i, f := range m.fills {
		f.begin(n[i], initial)
	}
}

// fillOf returns the fill of an event's table; nil (warned once) for a
// table no Into fills.
func (m *Multi[In]) fillOf(table string) filler[In] {
	if m.single {
		return m.fills[0]
	}
	if f := m.byName[table]; f != nil {
		return f
	}
	if !m.unknown[table] {
		if m.unknown == nil {
			m.unknown = map[string]bool{}
		}
		m.unknown[table] = true
		m.cfg.Logger.Warn("Ignored the source's objects of a table no Into fills", "table", table)
	}
	return nil
}

// setReached moves Revision forward to rev.
func (m *Multi[In]) setReached(rev uint64) {
	if rev <= m.reached.Load() {
		return
	}
	m.setRevision(rev)
}

// setRevision sets Revision to rev, and says it moved.
func (m *Multi[In]) setRevision(rev uint64) {
	if rev == m.reached.Load() {
		return
	}
	m.mu.Lock()
	m.reached.Store(rev)
	close(m.moved)
	m.moved = make(chan struct{})
	m.mu.Unlock()
	m.reportHealth()
}

// Revision returns the source revision that the tables reflect: every
// change of the source up to it is committed, and the tables hold the
// source's state at it (0 before the first list). It moves with each
// commit and each Progress event of the source (see the package doc), so
// it may pass the revision of the tables' latest change. Safe for
// concurrent use.
func (m *Multi[In]) Revision() uint64 { return m.reached.Load() }

// RevisionWatch returns Revision and a channel that closes when it moves.
func (m *Multi[In]) RevisionWatch() (uint64, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reached.Load(), m.moved
}

// Rejected returns the source's keys whose latest value was rejected
// (Filter or Transform failed or panicked, or the table refused the
// object), with why, by table and key (the table keeps the last good
// version of each, if any). Safe for concurrent use.
func (m *Multi[In]) Rejected() []Rejection {
	if p := m.rejectedNow.Load(); p != nil {
		return slices.Clone(*p)
	}
	return nil
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
