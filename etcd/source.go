package etcd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"

	"github.com/steadystate/steadystate/reflector"
)

// listPage is how many keys one range request of List reads.
const listPage = 1000

// Source is a reflector.Source of one table's desired objects for one
// node: the fleet-wide objects (scope "all") and the node's own (which win
// on a shared name), as raw values by name.
//
// Its watch turns etcd's progress notifications into reflector.Progress
// events, so that a reflector's Revision follows etcd's revision even when
// nothing of its table changes: a node that runs one reflector per table
// and reports the least of their revisions reaches an apply's revision
// although the apply changed one table only. etcd sends them when asked
// (RequestProgress, and after each liveness probe of the watch) and, for
// every watch, every ten minutes by default (etcd's
// --experimental-watch-progress-notify-interval).
type Source struct {
	client *clientv3.Client
	layout Layout
	table  string
	node   string

	// RequestTimeout bounds each request of List (a page of up to 1000
	// objects), so that an unreachable
	// cluster is reported (the reflector retries with backoff) rather
	// than waited for. A watch also checks every RequestTimeout that the
	// cluster answers a linearizable read (an etcd watch whose members are
	// all gone only waits): when it does not, the watch is lost, and the
	// reflector lists again, reports the failure and retries; when it
	// does, the watch asks for progress (RequestProgress), so that the
	// reflector's Revision trails etcd's by about RequestTimeout at most
	// (on etcd servers that may be asked: see ErrProgressUnsupported).
	// Default DefaultRequestTimeout.
	RequestTimeout time.Duration

	stream string // names the gRPC stream of the source's watches

	mu       sync.Mutex
	listed   view              // as of the latest List
	watches  int               // watches running
	metadata metadata.MD       // the watch's gRPC metadata: it names the watch's stream
	servers  map[string]string // endpoint → etcd server version, for those that told
}

// streamKey is the gRPC metadata key that gives each Source's watch a
// stream of its own; sources counts them.
const streamKey = "steadystate-watch-stream"

var sources atomic.Uint64

// DefaultRequestTimeout is Source.RequestTimeout's default.
const DefaultRequestTimeout = 5 * time.Second

// view is what a List found, and what the watch that follows starts from.
type view struct {
	genAll, genNode string
	fleet, own      map[string]bool // names in each scope's generation
}

var _ reflector.Source[[]byte] = (*Source)(nil)

// ErrNotWatching is wrapped by RequestProgress's error when the source has
// no watch running (before the reflector's first watch, or between a lost
// watch and the next).
var ErrNotWatching = errors.New("no watch running")

// ErrProgressUnsupported is wrapped by RequestProgress's error when the
// etcd servers cannot be asked for progress safely. Before etcd 3.4.25 and
// 3.5.8 a requested progress notification may overtake the events before
// it (etcd issue 15220: Debian's 3.4.23 sends it at once, before the events
// of a watch that is catching up), so the reflector's Revision would claim
// changes it does not hold yet; until 3.4.31 and 3.5.13 a request may go
// unanswered for good (etcd issue 17507). etcd's own timed notifications
// are safe on every version and still used. It is also the error while no
// server has told its version yet (List asks each endpoint once).
var ErrProgressUnsupported = errors.New("requested progress notifications are unsafe or unknown with these etcd servers")

// NewSource returns the source of table for node.
func NewSource(client *clientv3.Client, layout Layout, table, node string) (*Source, error) {
	if client == nil {
		return nil, errors.New("etcd source: client is nil")
	}
	if err := errors.Join(checkName("table", table), checkName("node", node)); err != nil {
		return nil, fmt.Errorf("etcd source: %w", err)
	}
	return &Source{client: client, layout: layout, table: table, node: node,
		stream: strconv.FormatUint(sources.Add(1), 10)}, nil
}

// List reads both scopes' generations in force at one revision.
func (s *Source) List(ctx context.Context) ([]reflector.Item[[]byte], uint64, error) {
	all, own := s.layout.Current(s.table, ScopeAll), s.layout.Current(s.table, NodeScope(s.node))
	rctx, cancel := s.request(ctx)
	resp, err := s.client.Txn(rctx).Then(clientv3.OpGet(all), clientv3.OpGet(own)).Commit()
	cancel()
	if err != nil {
		return nil, 0, fmt.Errorf("reading %s and %s: %w", all, own, err)
	}
	rev := resp.Header.Revision
	v := view{fleet: map[string]bool{}, own: map[string]bool{}}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		v.genAll = string(kvs[0].Value)
	}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
		v.genNode = string(kvs[0].Value)
	}
	values := map[string][]byte{}
	for _, sc := range []struct {
		scope, gen string
		names      map[string]bool
	}{{ScopeAll, v.genAll, v.fleet}, {NodeScope(s.node), v.genNode, v.own}} {
		if sc.gen == "" {
			continue
		}
		prefix := s.layout.Generation(s.table, sc.scope, sc.gen)
		if err := s.readRange(ctx, prefix, rev, func(name string, value []byte) {
			sc.names[name] = true
			values[name] = value // the node's scope comes second: it wins
		}); err != nil {
			return nil, 0, err
		}
	}
	items := make([]reflector.Item[[]byte], 0, len(values))
	for name, value := range values {
		items = append(items, reflector.Item[[]byte]{Key: name, Value: value})
	}
	slices.SortFunc(items, func(a, b reflector.Item[[]byte]) int { return strings.Compare(a.Key, b.Key) })
	s.mu.Lock()
	s.listed = v
	s.mu.Unlock()
	s.learnVersions(ctx)
	return items, uint64(rev), nil
}

// request returns the context of one request: RequestTimeout from now.
func (s *Source) request(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, cmp.Or(s.RequestTimeout, DefaultRequestTimeout))
}

// readRange reads every key under prefix at rev, in pages.
func (s *Source) readRange(ctx context.Context, prefix string, rev int64, each func(name string, value []byte)) error {
	end := clientv3.GetPrefixRangeEnd(prefix)
	from := prefix
	for {
		rctx, cancel := s.request(ctx)
		resp, err := s.client.Get(rctx, from, clientv3.WithRange(end), clientv3.WithRev(rev), clientv3.WithLimit(listPage),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
		cancel()
		if err != nil {
			return fmt.Errorf("reading %s at revision %d: %w", prefix, rev, err)
		}
		for _, kv := range resp.Kvs {
			each(strings.TrimPrefix(string(kv.Key), prefix), kv.Value)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// Watch streams the changes of both scopes after revision after, in
// revision order (one etcd watch over the table's keys; other nodes' scopes
// are dropped here, which costs each node their traffic, but a second
// watch could deliver a later revision before an earlier one, and the
// reflector's Revision would claim too much). A new generation in force,
// a removed object of the node's own scope (the fleet-wide one may show
// again) and a compacted revision are Resync; the channel closes when the
// watch is lost.
func (s *Source) Watch(ctx context.Context, after uint64) (<-chan reflector.Event[[]byte], error) {
	s.mu.Lock()
	v := s.listed
	s.mu.Unlock()
	if v.fleet == nil {
		return nil, errors.New("etcd source: Watch before List")
	}
	v.fleet, v.own = copySet(v.fleet), copySet(v.own)
	ctx, cancel := context.WithCancel(ctx)
	// clientv3 runs the watches whose contexts carry the same gRPC
	// metadata on one stream; this one gets a stream of its own (see
	// RequestProgress), which RequestProgress names with the metadata.
	wctx := clientv3.WithRequireLeader(metadata.AppendToOutgoingContext(ctx, streamKey, s.stream))
	md, _ := metadata.FromOutgoingContext(wctx)
	events := s.client.Watch(wctx, s.layout.Table(s.table),
		clientv3.WithPrefix(), clientv3.WithRev(int64(after)+1), clientv3.WithProgressNotify())
	s.mu.Lock()
	s.watches++
	s.metadata = md
	s.mu.Unlock()
	out := make(chan reflector.Event[[]byte])
	probe := cmp.Or(s.RequestTimeout, DefaultRequestTimeout)
	go func() {
		defer close(out)
		defer cancel()
		defer func() {
			s.mu.Lock()
			s.watches--
			s.mu.Unlock()
		}()
		w := watcher{s: s, v: v, out: out, ctx: ctx}
		ticker := time.NewTicker(probe)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				if !s.alive(ctx, probe) {
					return // lost: the reflector lists again
				}
				// Best effort: a request etcd drops or cannot take is
				// made again at the next tick.
				rctx, rcancel := context.WithTimeout(ctx, probe)
				s.RequestProgress(rctx)
				rcancel()
			case resp, ok := <-events:
				if !ok || !w.handle(resp) {
					return // lost, or a Resync sent
				}
			}
		}
	}()
	return out, nil
}

// alive tells whether the cluster answers a linearizable read within
// timeout.
func (s *Source) alive(ctx context.Context, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := s.client.Get(ctx, s.layout.Current(s.table, ScopeAll), clientv3.WithCountOnly())
	return err == nil
}

// RequestProgress asks etcd to send this source's watch a progress
// notification now: the reflector's Revision then reaches etcd's revision
// at the time of the answer, once the events before it are committed
// (within about a millisecond on loopback when nothing is pending). The
// watch itself asks after each liveness probe (every RequestTimeout); call
// it when a revision is wanted sooner, e.g. when a node is asked whether it
// reached an apply's revision.
//
// The request goes to the gRPC stream of the source's watch, which it has
// to itself: etcd answers a request for every watch of a stream at once,
// and only if each of them has caught up with etcd's revision and did not
// start beyond it. A watch that starts right after its list, with nothing
// written since, starts one beyond; on a stream shared by the sources of
// several tables it would silence all of them until the next write
// anywhere in the cluster. A request that etcd does not answer (this
// watch is catching up, just after a relist or under a burst of writes)
// is dropped, not deferred: if the revision did not move, ask again later.
//
// Errors: ErrNotWatching, ErrProgressUnsupported, or the client's (ctx
// ended, client closed).
func (s *Source) RequestProgress(ctx context.Context) error {
	s.mu.Lock()
	md, watching := s.metadata, s.watches > 0
	err := s.progressSafeLocked()
	s.mu.Unlock()
	switch {
	case !watching:
		return fmt.Errorf("etcd source of %s for %s: %w", s.table, s.node, ErrNotWatching)
	case err != nil:
		return fmt.Errorf("etcd source of %s for %s: %w", s.table, s.node, err)
	}
	if err := s.client.RequestProgress(metadata.NewOutgoingContext(ctx, md)); err != nil {
		return fmt.Errorf("etcd source of %s for %s: requesting progress: %w", s.table, s.node, err)
	}
	return nil
}

// learnVersions asks each endpoint of the client whose server version is
// not known yet for it, at once, within RequestTimeout; one that does not
// answer is asked again at the next List.
func (s *Source) learnVersions(ctx context.Context) {
	s.mu.Lock()
	var ask []string
	for _, ep := range s.client.Endpoints() {
		if _, ok := s.servers[ep]; !ok {
			ask = append(ask, ep)
		}
	}
	s.mu.Unlock()
	if len(ask) == 0 {
		return
	}
	versions := make([]string, len(ask))
	var wg sync.WaitGroup
	for i, ep := range ask {
		wg.Go(func() {
			rctx, cancel := s.request(ctx)
			defer cancel()
			if st, err := s.client.Status(rctx, ep); err == nil {
				versions[i] = st.Version
			}
		})
	}
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.servers == nil {
		s.servers = map[string]string{}
	}
	for i, ep := range ask {
		if versions[i] != "" {
			s.servers[ep] = versions[i]
		}
	}
}

// progressSafeLocked returns nil if progress may be requested: at least
// one server told its version, and every one that did orders requested
// progress notifications after the events before them.
func (s *Source) progressSafeLocked() error {
	if len(s.servers) == 0 {
		return fmt.Errorf("%w: no etcd server told its version yet", ErrProgressUnsupported)
	}
	for _, ep := range slices.Sorted(maps.Keys(s.servers)) {
		if v := s.servers[ep]; !orderedProgress(v) {
			return fmt.Errorf("%w: etcd %s at %s (3.4.31, 3.5.13, 3.6 and later are safe)", ErrProgressUnsupported, v, ep)
		}
	}
	return nil
}

// orderedProgress tells whether etcd server version v sends a requested
// progress notification after the events before it, and answers a request
// once the watches caught up even without a new event: 3.4.31, 3.5.13,
// 3.6.0 and later (the versions Kubernetes requires for the same use).
func orderedProgress(v string) bool {
	var major, minor, patch int
	if n, _ := fmt.Sscanf(v, "%d.%d.%d", &major, &minor, &patch); n < 3 {
		return false
	}
	switch {
	case major != 3:
		return major > 3
	case minor == 4:
		return patch >= 31
	case minor == 5:
		return patch >= 13
	}
	return minor >= 6
}

// watcher turns the watch responses into events.
type watcher struct {
	s   *Source
	v   view
	out chan<- reflector.Event[[]byte]
	ctx context.Context
}

// handle sends the events of resp; it returns false when the watch must
// end (after a Resync, or when it failed).
func (w *watcher) handle(resp clientv3.WatchResponse) bool {
	if resp.CompactRevision != 0 {
		// The revision to go on from is compacted away: list again.
		w.send(reflector.Event[[]byte]{Kind: reflector.Resync})
		return false
	}
	if resp.Canceled || resp.Err() != nil {
		return false
	}
	if resp.IsProgressNotify() {
		// Every event up to this revision came before.
		return w.send(reflector.Event[[]byte]{Kind: reflector.Progress, Revision: uint64(resp.Header.Revision)})
	}
	allScope, ownScope := w.s.layout.Scope(w.s.table, ScopeAll), w.s.layout.Scope(w.s.table, NodeScope(w.s.node))
	for _, ev := range resp.Events {
		key := string(ev.Kv.Key)
		var own bool
		switch {
		case strings.HasPrefix(key, allScope):
		case strings.HasPrefix(key, ownScope):
			own = true
		default:
			continue // another node's
		}
		scope, gen, names := ScopeAll, w.v.genAll, w.v.fleet
		if own {
			scope, gen, names = NodeScope(w.s.node), w.v.genNode, w.v.own
		}
		rev := uint64(ev.Kv.ModRevision)
		prefix := w.s.layout.Generation(w.s.table, scope, gen)
		switch {
		case key == w.s.layout.Current(w.s.table, scope):
			if ev.Type == clientv3.EventTypeDelete || string(ev.Kv.Value) != gen {
				// Another generation is in force: read it whole.
				w.send(reflector.Event[[]byte]{Kind: reflector.Resync, Revision: rev})
				return false
			}
		case gen != "" && strings.HasPrefix(key, prefix):
			if !w.object(ev, strings.TrimPrefix(key, prefix), own, names, rev) {
				return false
			}
		}
		// Other keys are generations being staged or deleted, counters.
	}
	// A watch delivers each revision whole and in order: every change of
	// the table up to the last event's revision has been sent, including
	// those this node ignores (a fleet-wide object its own one overrides,
	// another node's scope), which would otherwise not move its revision.
	if n := len(resp.Events); n > 0 {
		return w.send(reflector.Event[[]byte]{Kind: reflector.Progress, Revision: uint64(resp.Events[n-1].Kv.ModRevision)})
	}
	return true
}

// object sends the event of one object of the generation in force.
func (w *watcher) object(ev *clientv3.Event, name string, own bool, names map[string]bool, rev uint64) bool {
	if ev.Type == clientv3.EventTypePut {
		names[name] = true
		if !own && w.v.own[name] {
			return true // the node's own object wins
		}
		return w.send(reflector.Event[[]byte]{Kind: reflector.Put, Key: name, Value: ev.Kv.Value, Revision: rev})
	}
	delete(names, name)
	switch {
	case !own && w.v.own[name]:
		return true // the node's own object stays
	case own && w.v.fleet[name]:
		// The fleet-wide object shows again: read it.
		w.send(reflector.Event[[]byte]{Kind: reflector.Resync, Revision: rev})
		return false
	}
	return w.send(reflector.Event[[]byte]{Kind: reflector.Delete, Key: name, Revision: rev})
}

func (w *watcher) send(ev reflector.Event[[]byte]) bool {
	select {
	case w.out <- ev:
		return true
	case <-w.ctx.Done():
		return false
	}
}

func copySet(m map[string]bool) map[string]bool {
	c := make(map[string]bool, len(m))
	for k := range m {
		c[k] = true
	}
	return c
}
