package etcd

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"

	"github.com/steadystate/steadystate/reflector"
)

// MarksRevisions says that Watch ends the events of each watch response
// with a Progress at its last revision (reflector.RevisionMarker): etcd
// sends a revision whole within one response, so the reflector never
// takes quiet as the end of one.
func (s *Source) MarksRevisions() bool { return true }

var _ reflector.RevisionMarker = (*Source)(nil)

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
		v.fleet, v.own, v.overlay = maps.Clone(v.fleet), maps.Clone(v.own), maps.Clone(v.overlay)
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
				if !w.inForce(ev, table, v, rev) {
					return false
				}
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
			name := strings.TrimPrefix(key, prefix)
			if !own && v.overlay[name] {
				continue // the pinned delta's object hides it
			}
			if !w.object(ev, table, name, own, v, rev) {
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

// inForce takes a write of scope all's current key or of the node's pin
// of table: the fleet-wide generation in force for the node, and the
// delta pinned over it. A delta pinned over the generation the node reads
// is read and sent as its puts and deletes; a delta unpinned (its rollout
// completed or rolled back) is undone by reading its objects in the
// generation; a rewrite of the same generation changes nothing. Any other
// change is a Resync. It returns false when the watch must end.
func (w *watcher) inForce(ev *clientv3.Event, table string, v *view, rev uint64) bool {
	value := string(ev.Kv.Value)
	if ev.Type == clientv3.EventTypeDelete {
		value = ""
	}
	isPin, old := string(ev.Kv.Key) == w.s.layout.Pin(table, w.s.node), v.pin
	if isPin {
		v.pin = value
	} else {
		v.current = value
	}
	same := inForceFor(v.current, v.pin) == v.genAll
	pinMoved := isPin && value != old
	switch {
	case same && pinMoved && old == "" && isDelta(value):
		return w.overlayOn(table, v, rev)
	case same && pinMoved && isDelta(old) && value == "":
		return w.overlayOff(table, v, rev)
	case !same || (pinMoved && (isDelta(old) || isDelta(value))):
		// Another fleet-wide generation is in force for this node: read
		// it whole.
		w.send(reflector.Event[[]byte]{Kind: reflector.Resync, Revision: rev})
		return false
	}
	// Rewritten by an in-place apply or a rollout's end, or the pin and
	// the current key now name the same generation (a rollout completed):
	// the desired revision moved, not the state.
	return true
}

// overlayOn reads the delta now pinned (at rev) and sends its puts and
// deletes over the generation.
func (w *watcher) overlayOn(table string, v *view, rev uint64) bool {
	prefix := w.s.layout.Delta(table, v.pin)
	type change struct {
		put   bool
		name  string
		value []byte
	}
	var changes []change
	bad := false
	err := w.s.readRange(w.ctx, prefix, int64(rev), func(key string, value []byte, _ int64) {
		op, name, _ := strings.Cut(key, "/")
		if (op != "put" && op != "del") || checkName("object name", name) != nil {
			bad = true
		}
		changes = append(changes, change{put: op == "put", name: name, value: value})
	})
	if err != nil || bad {
		w.send(reflector.Event[[]byte]{Kind: reflector.Resync, Revision: rev}) // the list says what is wrong
		return false
	}
	v.overlay = map[string]bool{}
	for _, c := range changes {
		v.overlay[c.name] = true
		had := v.fleet[c.name]
		if c.put {
			v.fleet[c.name] = true
		} else {
			delete(v.fleet, c.name)
		}
		switch {
		case v.own[c.name]: // the node's own object wins
		case c.put:
			if !w.send(reflector.Event[[]byte]{Kind: reflector.Put, Table: table, Key: c.name, Value: c.value, Revision: rev}) {
				return false
			}
		case had:
			if !w.send(reflector.Event[[]byte]{Kind: reflector.Delete, Table: table, Key: c.name, Revision: rev}) {
				return false
			}
		}
	}
	return true
}

// overlayOff undoes the delta unpinned: it reads the objects the delta
// named in the generation at rev (where a completed rollout wrote them,
// or a halted one left them) and sends them.
func (w *watcher) overlayOff(table string, v *view, rev uint64) bool {
	names := slices.Sorted(maps.Keys(v.overlay))
	prefix := w.s.layout.Generation(table, ScopeAll, v.genAll)
	values := map[string][]byte{}
	for from := 0; from < len(names); from += maxTxnOps {
		var gets []clientv3.Op
		for _, name := range names[from:min(from+maxTxnOps, len(names))] {
			gets = append(gets, clientv3.OpGet(prefix+name, clientv3.WithRev(int64(rev))))
		}
		rctx, cancel := w.s.request(w.ctx)
		resp, err := w.s.client.Txn(rctx).Then(gets...).Commit()
		cancel()
		if err != nil {
			w.send(reflector.Event[[]byte]{Kind: reflector.Resync, Revision: rev})
			return false
		}
		for _, r := range resp.Responses {
			for _, kv := range r.GetResponseRange().Kvs {
				values[strings.TrimPrefix(string(kv.Key), prefix)] = kv.Value
			}
		}
	}
	v.overlay = nil
	for _, name := range names {
		value, ok := values[name]
		had := v.fleet[name]
		if ok {
			v.fleet[name] = true
		} else {
			delete(v.fleet, name)
		}
		switch {
		case v.own[name]:
		case ok:
			if !w.send(reflector.Event[[]byte]{Kind: reflector.Put, Table: table, Key: name, Value: value, Revision: rev}) {
				return false
			}
		case had:
			if !w.send(reflector.Event[[]byte]{Kind: reflector.Delete, Table: table, Key: name, Revision: rev}) {
				return false
			}
		}
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
