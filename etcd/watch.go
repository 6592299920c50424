package etcd

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"

	"github.com/steadystate/steadystate/reflector"
)

// Watch streams the changes of every table's scopes after revision after,
// in revision order: one etcd watch over the tables' keys (other nodes'
// scopes are dropped here, which costs each node their traffic, but a
// second watch could deliver a later revision before an earlier one, and
// the reflector's Revision would claim too much). A new generation in
// force, a removed object of the node's own scope (the fleet-wide one may
// show again) and a compacted revision are Resync; after each response
// that changed this node's desired state comes a Progress at its last
// revision (see Source); the channel closes when the watch is lost.
func (s *Source) Watch(ctx context.Context, after uint64) (<-chan reflector.Event[[]byte], error) {
	s.mu.Lock()
	listed := s.listed
	s.mu.Unlock()
	if listed == nil {
		return nil, errors.New("etcd source: Watch before List")
	}
	views := make(map[string]*view, len(listed))
	for t, v := range listed {
		v.fleet, v.own = maps.Clone(v.fleet), maps.Clone(v.own)
		views[t] = &v
	}
	ctx, cancel := context.WithCancel(ctx)
	// clientv3 runs the watches whose contexts carry the same gRPC
	// metadata on one stream; this one gets a stream of its own (see
	// RequestProgress), which RequestProgress names with the metadata.
	wctx := clientv3.WithRequireLeader(metadata.AppendToOutgoingContext(ctx, streamKey, s.stream))
	md, _ := metadata.FromOutgoingContext(wctx)
	prefix := s.layout.Desired()
	if len(s.tables) == 1 {
		prefix = s.layout.Table(s.tables[0])
	}
	events := s.client.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(int64(after)+1))
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
		w := watcher{s: s, views: views, out: out, ctx: ctx}
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
	_, err := s.client.Get(ctx, s.layout.Current(s.tables[0], ScopeAll), clientv3.WithCountOnly())
	return err == nil
}

// watcher turns the watch responses into events.
type watcher struct {
	s     *Source
	views map[string]*view // by table
	out   chan<- reflector.Event[[]byte]
	ctx   context.Context
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
		// Asked for (RequestProgress): every event up to this revision
		// came before.
		return w.send(reflector.Event[[]byte]{Kind: reflector.Progress, Revision: uint64(resp.Header.Revision)})
	}
	desired := w.s.layout.Desired()
	changed := false
	for _, ev := range resp.Events {
		key := string(ev.Kv.Key)
		table, _, _ := strings.Cut(strings.TrimPrefix(key, desired), "/")
		v := w.views[table]
		if v == nil {
			continue // a table this node does not take
		}
		rev := uint64(ev.Kv.ModRevision)
		var own bool
		switch {
		case strings.HasPrefix(key, w.s.layout.Scope(table, ScopeAll)):
			if key == w.s.layout.Current(table, ScopeAll) || key == w.s.layout.Pin(table, w.s.node) {
				value := string(ev.Kv.Value)
				if ev.Type == clientv3.EventTypeDelete {
					value = ""
				}
				if key == w.s.layout.Pin(table, w.s.node) {
					v.pin = value
				} else {
					v.current = value
				}
				if inForceFor(v.current, v.pin) != v.genAll {
					// Another fleet-wide generation is in force for
					// this node: read it whole.
					w.send(reflector.Event[[]byte]{Kind: reflector.Resync, Revision: rev})
					return false
				}
				// Rewritten by an in-place apply, or the pin and the
				// current key now name the same generation (a rollout
				// completed): the desired revision moved, not the state.
				changed = true
				continue
			}
		case strings.HasPrefix(key, w.s.layout.Scope(table, NodeScope(w.s.node))):
			own = true
			if key == w.s.layout.Current(table, NodeScope(w.s.node)) {
				if ev.Type == clientv3.EventTypeDelete || string(ev.Kv.Value) != v.genNode {
					w.send(reflector.Event[[]byte]{Kind: reflector.Resync, Revision: rev})
					return false
				}
				changed = true // rewritten by an in-place apply
				continue
			}
		default:
			continue // another node's
		}
		scope, gen := ScopeAll, v.genAll
		if own {
			scope, gen = NodeScope(w.s.node), v.genNode
		}
		if prefix := w.s.layout.Generation(table, scope, gen); gen != "" && strings.HasPrefix(key, prefix) {
			changed = true
			if !w.object(ev, table, strings.TrimPrefix(key, prefix), own, v, rev) {
				return false
			}
		}
		// Other keys are generations being staged or deleted, counters,
		// other nodes' pins.
	}
	// A watch delivers each revision whole and in order: every change of
	// this node's desired state up to the last event's revision has been
	// sent.
	if n := len(resp.Events); changed && n > 0 {
		return w.send(reflector.Event[[]byte]{Kind: reflector.Progress, Revision: uint64(resp.Events[n-1].Kv.ModRevision)})
	}
	return true
}

// object sends the event of one object of the generation in force.
func (w *watcher) object(ev *clientv3.Event, table, name string, own bool, v *view, rev uint64) bool {
	names := v.fleet
	if own {
		names = v.own
	}
	if ev.Type == clientv3.EventTypePut {
		names[name] = true
		if !own && v.own[name] {
			return true // the node's own object wins
		}
		return w.send(reflector.Event[[]byte]{Kind: reflector.Put, Table: table, Key: name, Value: ev.Kv.Value, Revision: rev})
	}
	delete(names, name)
	switch {
	case !own && v.own[name]:
		return true // the node's own object stays
	case own && v.fleet[name]:
		// The fleet-wide object shows again: read it.
		w.send(reflector.Event[[]byte]{Kind: reflector.Resync, Revision: rev})
		return false
	}
	return w.send(reflector.Event[[]byte]{Kind: reflector.Delete, Table: table, Key: name, Revision: rev})
}

func (w *watcher) send(ev reflector.Event[[]byte]) bool {
	select {
	case w.out <- ev:
		return true
	case <-w.ctx.Done():
		return false
	}
}
