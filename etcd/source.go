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

// Source is a reflector.Source of the desired objects of one node: for
// each of its tables, the fleet-wide objects (scope "all") and the node's
// own (which win on a shared name), as raw values by name. A source of
// several tables (NewTablesSource) names each event's and item's table,
// for a reflector.Multi that commits one etcd revision to all of them at
// once.
//
// One etcd watch covers every table, so that revisions arrive in order.
// After each watch response that changed this node's desired state (an
// object of a generation in force, a scope's current key, or the node's
// pin: see Layout.Pin), the watch
// sends a reflector.Progress at the response's last revision: etcd sends
// each revision whole within one response, so the reflector commits the
// response's events at once and its Revision reaches the revision of the
// node's latest change without waiting for etcd's progress notifications,
// on every etcd version. Responses that change nothing of this node (other
// nodes' scopes, generations being staged) do not move it: a node's
// revision follows its own desired state (DesiredRevision), not every
// write to the cluster.
type Source struct {
	client *clientv3.Client
	layout Layout
	tables []string // sorted
	node   string

	// RequestTimeout bounds each request of List (a page of up to 1000
	// objects), so that an unreachable cluster is reported (the reflector
	// retries with backoff) rather than waited for. A watch also checks
	// every RequestTimeout that the cluster answers a linearizable read
	// (an etcd watch whose members are all gone only waits): when it does
	// not, the watch is lost, and the reflector lists again, reports the
	// failure and retries. Default DefaultRequestTimeout.
	RequestTimeout time.Duration

	stream string // names the gRPC stream of the source's watches

	mu       sync.Mutex
	listed   map[string]view   // by table, as of the latest List
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

// view is what a List found of one table, and what the watch that
// follows starts from.
type view struct {
	// current is scope all's generation in force, pin the node's pin of
	// the table ("": none); genAll is the fleet-wide generation the node
	// reads, its pin if it has one, else current.
	current, pin    string
	genAll, genNode string
	fleet, own      map[string]bool // names in each scope's generation (a delta's applied)
	// overlay names the objects the pinned delta puts or removes (nil
	// without one): the generation's own keys of those names are hidden.
	overlay map[string]bool
}

// inForceFor is the fleet-wide generation a node reads: its pin, else the
// current one (a pin that names a delta is over the current one).
func inForceFor(current, pin string) string {
	if pin != "" && !isDelta(pin) {
		return pin
	}
	return current
}

var _ reflector.Source[[]byte] = (*Source)(nil)

// NewSource returns the source of one table for node (its events and items
// name the table).
func NewSource(client *clientv3.Client, layout Layout, table, node string) (*Source, error) {
	return NewTablesSource(client, layout, []string{table}, node)
}

// NewTablesSource returns the source of several tables for node: one watch
// and one list over all of them, each event and item naming its table. An
// etcd transaction reads at most 128 keys, and a list reads three per
// table, so a source has at most 42 tables.
func NewTablesSource(client *clientv3.Client, layout Layout, tables []string, node string) (*Source, error) {
	if client == nil {
		return nil, errors.New("etcd source: client is nil")
	}
	errs := []error{checkName("node", node)}
	if len(tables) == 0 {
		errs = append(errs, errors.New("no table"))
	}
	if 3*len(tables)+1 > maxTxnOps {
		errs = append(errs, fmt.Errorf("%d tables: one list reads at most %d", len(tables), (maxTxnOps-1)/3))
	}
	for _, t := range tables {
		errs = append(errs, checkName("table", t))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("etcd source: %w", err)
	}
	return &Source{client: client, layout: layout, tables: slices.Compact(slices.Sorted(slices.Values(tables))), node: node,
		stream: strconv.FormatUint(sources.Add(1), 10)}, nil
}

// List reads every table's generations in force for the node, of both
// scopes (the fleet-wide one its pin, if a rollout pinned it), at one
// revision. A current key or pin that does not name a generation, or a
// layout version this package does not know (ErrUnknownLayout), is an
// error naming it: the reflector keeps the last good state and retries.
func (s *Source) List(ctx context.Context) ([]reflector.Item[[]byte], uint64, error) {
	var gets []clientv3.Op
	for _, t := range s.tables {
		gets = append(gets, clientv3.OpGet(s.layout.Current(t, ScopeAll)), clientv3.OpGet(s.layout.Current(t, NodeScope(s.node))),
			clientv3.OpGet(s.layout.Pin(t, s.node)))
	}
	// The layout version, read with the rest: an unknown one is not read.
	gets = append(gets, clientv3.OpGet(s.layout.VersionKey()))
	rctx, cancel := s.request(ctx)
	resp, err := s.client.Txn(rctx).Then(gets...).Commit()
	cancel()
	if err != nil {
		return nil, 0, fmt.Errorf("reading the generations in force of %s for %s: %w", strings.Join(s.tables, ", "), s.node, err)
	}
	if err := checkVersion(s.layout, resp.Responses[len(gets)-1].GetResponseRange().Kvs); err != nil {
		return nil, 0, err
	}
	rev := resp.Header.Revision
	views := map[string]view{}
	var items []reflector.Item[[]byte]
	for i, t := range s.tables {
		v := view{fleet: map[string]bool{}, own: map[string]bool{}}
		for j, gen := range []*string{&v.current, &v.genNode, &v.pin} {
			kvs := resp.Responses[3*i+j].GetResponseRange().Kvs
			if len(kvs) == 0 {
				continue
			}
			if value := string(kvs[0].Value); parseGen(value) == 0 && (j < 2 || !isDelta(value)) {
				return nil, 0, fmt.Errorf("%s holds %q, not a generation (g000000000001): not reading it", kvs[0].Key, kvs[0].Value)
			}
			*gen = string(kvs[0].Value)
		}
		v.genAll = inForceFor(v.current, v.pin)
		// The fleet-wide objects: the generation's, then a delta's over
		// them; then the node's own, which win.
		byName := map[string]reflector.Item[[]byte]{}
		item := func(name string, value []byte, mod int64) {
			byName[name] = reflector.Item[[]byte]{Table: t, Key: name, Value: value, Revision: uint64(mod)}
		}
		if v.genAll != "" {
			if err := s.readRange(ctx, s.layout.Generation(t, ScopeAll, v.genAll), rev, item); err != nil {
				return nil, 0, err
			}
		}
		if isDelta(v.pin) {
			v.overlay = map[string]bool{}
			var bad error
			if err := s.readRange(ctx, s.layout.Delta(t, v.pin), rev, func(key string, value []byte, mod int64) {
				switch op, name, _ := strings.Cut(key, "/"); {
				case op == "put" && checkName("object name", name) == nil:
					item(name, value, mod)
					v.overlay[name] = true
				case op == "del" && checkName("object name", name) == nil:
					delete(byName, name)
					v.overlay[name] = true
				default:
					bad = fmt.Errorf("%s%s: not put/NAME or del/NAME of a delta: not reading it", s.layout.Delta(t, v.pin), key)
				}
			}); err != nil {
				return nil, 0, err
			}
			if bad != nil {
				return nil, 0, bad
			}
		}
		for name := range byName {
			v.fleet[name] = true
		}
		if v.genNode != "" {
			if err := s.readRange(ctx, s.layout.Generation(t, NodeScope(s.node), v.genNode), rev, func(name string, value []byte, mod int64) {
				v.own[name] = true
				item(name, value, mod)
			}); err != nil {
				return nil, 0, err
			}
		}
		for _, name := range slices.Sorted(maps.Keys(byName)) {
			items = append(items, byName[name])
		}
		views[t] = v
	}
	s.mu.Lock()
	s.listed = views
	s.mu.Unlock()
	s.learnVersions(ctx)
	return items, uint64(rev), nil
}

// request returns the context of one request: RequestTimeout from now.
func (s *Source) request(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, cmp.Or(s.RequestTimeout, DefaultRequestTimeout))
}

// readRange reads every key under prefix at rev, in pages.
func (s *Source) readRange(ctx context.Context, prefix string, rev int64, each func(name string, value []byte, mod int64)) error {
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
			each(strings.TrimPrefix(string(kv.Key), prefix), kv.Value, kv.ModRevision)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
