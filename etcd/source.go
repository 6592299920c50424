package etcd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/steadystate/steadystate/reflector"
)

// listPage is how many keys one range request of List reads.
const listPage = 1000

// Source is a reflector.Source of one table's desired objects for one
// node: the fleet-wide objects (scope "all") and the node's own (which win
// on a shared name), as raw values by name.
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
	// reflector lists again, reports the failure and retries. Default
	// DefaultRequestTimeout.
	RequestTimeout time.Duration

	mu     sync.Mutex
	listed view // as of the latest List
}

// DefaultRequestTimeout is Source.RequestTimeout's default.
const DefaultRequestTimeout = 5 * time.Second

// view is what a List found, and what the watch that follows starts from.
type view struct {
	genAll, genNode string
	fleet, own      map[string]bool // names in each scope's generation
}

var _ reflector.Source[[]byte] = (*Source)(nil)

// NewSource returns the source of table for node.
func NewSource(client *clientv3.Client, layout Layout, table, node string) (*Source, error) {
	if client == nil {
		return nil, errors.New("etcd source: client is nil")
	}
	if err := errors.Join(checkName("table", table), checkName("node", node)); err != nil {
		return nil, fmt.Errorf("etcd source: %w", err)
	}
	return &Source{client: client, layout: layout, table: table, node: node}, nil
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
	events := s.client.Watch(clientv3.WithRequireLeader(ctx), s.layout.Table(s.table),
		clientv3.WithPrefix(), clientv3.WithRev(int64(after)+1), clientv3.WithProgressNotify())
	out := make(chan reflector.Event[[]byte])
	probe := cmp.Or(s.RequestTimeout, DefaultRequestTimeout)
	go func() {
		defer close(out)
		defer cancel()
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
