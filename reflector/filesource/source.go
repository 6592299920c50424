package filesource

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/steadystate/steadystate/internal/later"
	"github.com/steadystate/steadystate/internal/shrink"
	"github.com/steadystate/steadystate/reflector"
)

// Config configures a Source. Zero values mean the documented defaults.
type Config[In any] struct {
	// Path is the file. Required.
	Path string
	// Decode parses and validates the whole file into its objects, each
	// an Item with its Table (for a multi-table reflector) and Key; two
	// items of one table may not share a key. Its error should say where
	// (the file, the line, the entry): it is what the operator reads.
	// data is a fresh read of the file, which the source never changes:
	// Decode may keep it. Required.
	Decode func(path string, data []byte) ([]reflector.Item[In], error)
	// Equal, if set, tells two values of a key apart: a new version sends
	// only the keys whose value changed. Without it, every key of a new
	// version is sent (the reflector's writer still writes only what
	// changed).
	Equal func(a, b In) bool
	// SettleTime is how long the file must be quiet before it is read
	// (a rename into place is read at once). Default DefaultSettleTime.
	SettleTime time.Duration
	// PollInterval is how often the file is read even without a
	// notification. Default DefaultPollInterval.
	PollInterval time.Duration
	// Health, if set, reports the file's state: OK naming the version
	// loaded, Degraded naming the problem while the file is bad.
	Health reflector.Health
	// Metrics, if set, counts the reads (default NopMetrics).
	Metrics Metrics
	// Logger logs each version loaded and each problem once (default
	// slog.Default()).
	Logger *slog.Logger
	// EmptyHint, if set, ends the error for an empty file (ErrEmpty): how
	// the program's format says "nothing desired", e.g. "write `{}` to
	// remove all desired state".
	EmptyHint string
	// Idle, if set, closes when the program has the cores to spare: the
	// work a large first version leaves for the next one (the map the
	// next version is compared with) waits for it, or for the next
	// version, whichever comes first, instead of competing with the
	// program's start. nil: that work starts at once, in the background.
	Idle <-chan struct{}
}

// Defaults of Config.
const (
	DefaultSettleTime   = 500 * time.Millisecond
	DefaultPollInterval = 10 * time.Second
)

// Metrics counts a Source's reads; an implementation embeds NopMetrics, so
// that a method added later does not break it.
type Metrics interface {
	// Loaded is a good version read: objects in all, changed of them.
	Loaded(path string, objects, changed int)
	// Rejected is a version that could not be read or decoded.
	Rejected(path string)
	// Deferred is a read put off: the file was being written.
	Deferred(path string)
}

// NopMetrics counts nothing.
type NopMetrics struct{}

func (NopMetrics) Loaded(string, int, int) {}
func (NopMetrics) Rejected(string)         {}
func (NopMetrics) Deferred(string)         {}

// ErrEmpty is wrapped by the error for an empty or whitespace-only file.
var ErrEmpty = errors.New("the file is empty: not applied (a writer may have left it half-way)")

// ErrInvalidConfig is wrapped by New's error for a bad Config.
var ErrInvalidConfig = errors.New("invalid file source config")

// Source is a reflector.Source of a file; see the package doc.
type Source[In any] struct {
	cfg    Config[In]
	reload chan struct{}

	// mu guards the state of the latest good version; read holds it.
	mu      sync.Mutex
	rev     uint64                // the latest good version's; 0 before the first
	items   map[itemKey]*slot[In] // the latest good version
	gen     uint64                // the stamp of the version take compares
	lastSum [sha256.Size]byte     // the last version read, good or bad
	lastErr string                // the last problem reported
	// first is the first good version in key order, until List takes it:
	// its diff sorted it already.
	first []reflector.Item[In]
	// epoch counts the Lists and Watches: only the latest may take a new
	// version, so that a watch that is ending never takes one it cannot
	// send any more.
	epoch uint64
	// peak is the most items held since items was made (see shrink.Map:
	// memory follows the file, not its largest version).
	peak int
	// watches counts the watches started (for tests).
	watches atomic.Int64
	// n is how many items the latest good version has.
	n int
	// filling, if not nil, is the map of a first version's items, made
	// in the background once Config.Idle closes (see take); settle waits
	// for it (and has it made at once).
	filling *later.Result[map[itemKey]*slot[In]]
}

// fillAbove is how many items a first version needs for its items to be
// made in the background (a variable for tests).
var fillAbove = 4096

// settle waits for the items being made in the background, if any. s.mu
// is held; every use of s.items comes after it.
func (s *Source[In]) settle() {
	if s.filling != nil {
		s.items = shrink.Map(s.filling.Wait(), &s.peak) // its peak
		s.filling = nil
	}
}

type itemKey struct{ table, key string }

// slot is an item of the latest good version, and the stamp of the last
// version that had its key.
type slot[In any] struct {
	item reflector.Item[In]
	seen uint64
}

var _ reflector.Source[int] = (*Source[int])(nil)

// New validates cfg and returns the source. Nothing is read before List.
func New[In any](cfg Config[In]) (*Source[In], error) {
	var errs []error
	if cfg.Path == "" {
		errs = append(errs, errors.New("the Path is required"))
	}
	if cfg.Decode == nil {
		errs = append(errs, errors.New("a Decode function is required"))
	}
	if cfg.SettleTime < 0 || cfg.PollInterval < 0 {
		errs = append(errs, errors.New("SettleTime and PollInterval must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w %q: %w", ErrInvalidConfig, cfg.Path, err)
	}
	cfg.SettleTime = cmp.Or(cfg.SettleTime, DefaultSettleTime)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, DefaultPollInterval)
	if cfg.Metrics == nil {
		cfg.Metrics = NopMetrics{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Source[In]{cfg: cfg, reload: make(chan struct{}, 1)}, nil
}

// Reload asks for the file to be read now (SIGHUP in daemon use); it
// returns at once.
func (s *Source[In]) Reload() {
	select {
	case s.reload <- struct{}{}:
	default:
	}
}

// Revision returns the latest good version's revision (0 before the
// first).
func (s *Source[In]) Revision() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev
}

// List returns the latest good version of the file, read again now. Before
// the first good version it waits for one (watching the file), so a table
// is never initialized from a file that did not parse; it returns early
// only when ctx ends.
//
// A first version good at once is read without a watch: closing a watch
// (an inotify instance) waits for the kernel's grace period, 1-17 ms of a
// start's critical path.
func (s *Source[In]) List(ctx context.Context) ([]reflector.Item[In], uint64, error) {
	epoch := s.begin()
	// A file not ready now is the watch's to read (the first List's) or
	// to read later (the Watch's).
	s.read(epoch, false, false)
	if s.Revision() == 0 {
		if err := s.watch(ctx, epoch, nil, func() bool { return s.Revision() > 0 }); err != nil {
			return nil, 0, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if first := s.first; first != nil {
		s.first = nil
		if len(first) == s.n && s.rev == 1 {
			return first, s.rev, nil
		}
	}
	s.settle()
	items := make([]reflector.Item[In], 0, len(s.items))
	for _, sl := range s.items {
		items = append(items, sl.item)
	}
	slices.SortFunc(items, func(a, b reflector.Item[In]) int {
		return cmp.Or(cmp.Compare(a.Table, b.Table), cmp.Compare(a.Key, b.Key))
	})
	return items, s.rev, nil
}

// Watch sends each new good version after revision after as its difference
// from the one before (Put and Delete events at the new revision) and a
// Progress at it. If a version came since after, it sends Resync. The
// channel closes when ctx ends.
func (s *Source[In]) Watch(ctx context.Context, after uint64) (<-chan reflector.Event[In], error) {
	out := make(chan reflector.Event[In])
	send := func(ev reflector.Event[In]) bool {
		select {
		case out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	epoch := s.begin()
	go func() {
		defer close(out)
		if s.Revision() != after {
			send(reflector.Event[In]{Kind: reflector.Resync})
			return
		}
		s.watch(ctx, epoch, func(evs []reflector.Event[In], rev uint64) bool {
			for _, ev := range evs {
				if !send(ev) {
					return false
				}
			}
			return send(reflector.Event[In]{Kind: reflector.Progress, Revision: rev})
		}, nil)
	}()
	return out, nil
}

// MarksRevisions says that Watch ends each version's events with a
// Progress at its revision (reflector.RevisionMarker).
func (s *Source[In]) MarksRevisions() bool { return true }

var _ reflector.RevisionMarker = (*Source[int])(nil)

// begin starts a List or a Watch: the one before may no longer take a
// version.
func (s *Source[In]) begin() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.epoch++
	return s.epoch
}

// read reads the file and, if it is a new good version, takes it and
// returns its difference from the one before and its revision. renamed
// says the file was just renamed into place (read it without waiting for
// it to settle). retry says the file was not ready (being written): read
// again after the settle time. A read of a List or Watch that is no longer
// the latest (epoch) reads nothing. Without events (a List's read, which
// returns the whole version) the difference is taken but not returned.
func (s *Source[In]) read(epoch uint64, renamed, events bool) (evs []reflector.Event[In], rev uint64, retry bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if epoch != s.epoch {
		return nil, 0, false
	}
	path := s.cfg.Path
	first, writing, err := readSnapshot(path)
	if err != nil {
		s.lastSum = [sha256.Size]byte{} // the same file back is news
		s.reject(fmt.Errorf("reading %s: %w", path, err))
		return nil, 0, false
	}
	if age := time.Since(first.info.ModTime()); writing || !renamed && age >= 0 && age < s.cfg.SettleTime {
		s.cfg.Metrics.Deferred(path)
		return nil, 0, true
	}
	sum := sha256.Sum256(first.data)
	if sum == s.lastSum {
		return nil, 0, false
	}
	var items []reflector.Item[In]
	if len(bytes.TrimSpace(first.data)) == 0 {
		err = fmt.Errorf("%s: %w", path, ErrEmpty)
		if s.cfg.EmptyHint != "" {
			err = fmt.Errorf("%w; %s", err, s.cfg.EmptyHint)
		}
	} else {
		items, err = s.cfg.Decode(path, first.data)
	}
	// Decoding took time: what was decoded must still be the whole file.
	same, writing, againErr := first.stillSame(path)
	if againErr != nil || writing || !same {
		s.cfg.Metrics.Deferred(path)
		return nil, 0, true
	}
	s.lastSum = sum // report once per version of the file
	var diff change
	if err == nil {
		diff, err = s.diff(path, items)
	}
	if err != nil {
		s.reject(err)
		return nil, 0, false
	}
	return s.take(items, diff, events)
}

// change is the difference of a new version from the latest good one:
// the keys it no longer has, and its items (indexes) that are new or
// (with Equal) changed, each in key order.
type change struct {
	deleted []itemKey
	put     []int
}

// diff returns the difference of items, a new version, from the latest
// good one, or the error for two items of one table with one key. Its cost
// is a lookup per item and a sort of the keys that changed: an edit of a
// large file sorts no more than its edit. It changes nothing but the
// slots' stamps.
func (s *Source[In]) diff(path string, items []reflector.Item[In]) (change, error) {
	s.settle()
	s.gen++
	if len(s.items) == 0 {
		return firstDiff(path, items)
	}
	var c change
	var twice []int // into items
	matched, added := 0, 0
	for i, it := range items {
		k := itemKey{it.Table, it.Key}
		sl, ok := s.items[k]
		switch {
		case !ok:
			added++
			c.put = append(c.put, i)
		case sl.seen == s.gen:
			twice = append(twice, i)
		default:
			sl.seen = s.gen
			matched++
			if s.cfg.Equal == nil || !s.cfg.Equal(sl.item.Value, it.Value) {
				c.put = append(c.put, i)
			}
		}
	}
	if matched < len(s.items) {
		for k, sl := range s.items {
			if sl.seen != s.gen {
				c.deleted = append(c.deleted, k)
			}
		}
		slices.SortFunc(c.deleted, compareKeys)
	}
	// In key order, a key given twice is next to itself, its first (in
	// file order) first.
	slices.SortFunc(c.put, func(i, j int) int {
		return cmp.Or(compareKeys(itemKey{items[i].Table, items[i].Key}, itemKey{items[j].Table, items[j].Key}), cmp.Compare(i, j))
	})
	if added > 1 {
		put := c.put[:0]
		for n, i := range c.put {
			if n > 0 && items[put[len(put)-1]].Table == items[i].Table && items[put[len(put)-1]].Key == items[i].Key {
				twice = append(twice, i) // both new: a key seen before is not added
				continue
			}
			put = append(put, i)
		}
		c.put = put
	}
	if len(twice) > 0 {
		return change{}, givenTwice(path, items, twice)
	}
	return c, nil
}

// givenTwice is the error for the items (indexes) whose key an item
// before them has.
func givenTwice[In any](path string, items []reflector.Item[In], twice []int) error {
	slices.Sort(twice)
	errs := make([]error, len(twice))
	for j, i := range twice {
		errs[j] = fmt.Errorf("%s: %s %q given twice", path, cmp.Or(items[i].Table, "key"), items[i].Key)
	}
	return errors.Join(errs...)
}

// take makes items the latest good version, whose difference from the
// one before is c: only the keys of c change (an item Equal to the one
// before stays as it was). It returns the version's revision, which moves
// only when something changed (and with the first version), and, with
// events, c as events (Delete events, then Put events) at that revision.
// (A start's 60,000 events were made for a List that returns the items.)
//
// The items of a large first version taken for a List (a start: 60,000
// of them) are made in the background, on the core the start leaves idle
// then: only the next version needs them. The version is already s.first,
// which the List returns.
func (s *Source[In]) take(items []reflector.Item[In], c change, events bool) ([]reflector.Event[In], uint64, bool) {
	s.settle()
	background := false
	if s.items == nil {
		s.first = make([]reflector.Item[In], len(c.put))
		for n, i := range c.put {
			s.first[n] = items[i]
		}
		if background = !events && len(c.put) >= fillAbove; background {
			// items and c are the source's, and no one changes them.
			gen := s.gen
			s.filling = later.Start(s.cfg.Idle, func() map[itemKey]*slot[In] {
				m := make(map[itemKey]*slot[In], len(c.put))
				for _, i := range c.put {
					it := items[i]
					m[itemKey{it.Table, it.Key}] = &slot[In]{item: it, seen: gen}
				}
				return m
			})
		} else {
			s.items = make(map[itemKey]*slot[In], len(c.put))
		}
	}
	s.n = len(items)
	changed := len(c.deleted) + len(c.put)
	if changed > 0 || s.rev == 0 {
		s.rev++
	}
	var evs []reflector.Event[In]
	if events {
		evs = make([]reflector.Event[In], 0, changed)
	}
	for _, k := range c.deleted {
		delete(s.items, k)
		if events {
			evs = append(evs, reflector.Event[In]{Kind: reflector.Delete, Table: k.table, Key: k.key, Revision: s.rev})
		}
	}
	fresh := len(s.items) == 0 // every key is new: no lookup
	for _, i := range c.put {
		if background && !events {
			break
		}
		it := items[i]
		k := itemKey{it.Table, it.Key}
		if fresh {
			s.items[k] = &slot[In]{item: it, seen: s.gen}
		} else if sl, ok := s.items[k]; ok {
			sl.item = it
		} else {
			s.items[k] = &slot[In]{item: it, seen: s.gen}
		}
		if events {
			evs = append(evs, reflector.Event[In]{Kind: reflector.Put, Table: it.Table, Key: it.Key, Value: it.Value, Revision: s.rev})
		}
	}
	if !background {
		s.items = shrink.Map(s.items, &s.peak)
	}
	s.lastErr = ""
	s.cfg.Metrics.Loaded(s.cfg.Path, len(items), changed)
	msg := fmt.Sprintf("loaded %s: %d objects (version %d)", s.cfg.Path, len(items), s.rev)
	if s.cfg.Health != nil {
		s.cfg.Health.OK(msg)
	}
	attrs := []any{"file", s.cfg.Path}
	if byTable := countTables(items); len(byTable) > 1 || len(byTable) == 1 && byTable[0].table != "" {
		for _, c := range byTable {
			attrs = append(attrs, c.table, c.n)
		}
	} else {
		attrs = append(attrs, "objects", len(items))
	}
	s.cfg.Logger.Info("Desired state loaded", append(attrs, "changed", changed, "version", s.rev)...)
	return evs, s.rev, false
}

// tableCount is how many items of a version are of one table.
type tableCount struct {
	table string
	n     int
}

// countTables counts items by table, in the order their tables first come.
func countTables[In any](items []reflector.Item[In]) []tableCount {
	var out []tableCount
	at := map[string]int{}
	for _, it := range items {
		i, ok := at[it.Table]
		if !ok {
			i = len(out)
			at[it.Table] = i
			out = append(out, tableCount{table: it.Table})
		}
		out[i].n++
	}
	return out
}

func compareKeys(a, b itemKey) int {
	return cmp.Or(cmp.Compare(a.table, b.table), cmp.Compare(a.key, b.key))
}

// reject reports a file that is not taken: health Degraded, counted,
// logged once per distinct problem.
func (s *Source[In]) reject(err error) {
	if err.Error() == s.lastErr {
		return
	}
	s.lastErr = err.Error()
	s.cfg.Metrics.Rejected(s.cfg.Path)
	keep := "keeping the current desired state"
	if s.rev == 0 {
		keep = "nothing applied until the file is good"
	}
	if s.cfg.Health != nil {
		s.cfg.Health.Degraded(fmt.Sprintf("desired state in %s rejected; %s", s.cfg.Path, keep), err)
	}
	s.cfg.Logger.Error("Desired state rejected; "+keep, "file", s.cfg.Path, "error", err)
}
