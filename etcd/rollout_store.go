package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// rolloutStore is where a driver keeps a rollout and reads its nodes:
// etcd (etcdStore), or a model of it in the tests.
type rolloutStore interface {
	// switchNodes writes r (whose Switched counts nodes) and pins each of
	// nodes to r's new generations, in one transaction, if the driver
	// still holds the rollout; else ErrRolloutLost.
	switchNodes(ctx context.Context, r *Rollout, nodes []string) error
	// pinBatch is how many nodes one switchNodes may pin.
	pinBatch(r *Rollout) int
	// save writes r if the driver still holds the rollout; else
	// ErrRolloutLost.
	save(ctx context.Context, r *Rollout) error
	// observe reads the nodes' statuses and desired revisions, and the
	// store's revision they were read at. With claimed, it fails with
	// ErrRolloutLost when the driver no longer holds the rollout.
	observe(ctx context.Context, r *Rollout, nodes []string, claimed bool) (map[string]nodeObs, int64, error)
	// wait returns once anything changed after revision after, or when
	// ctx ends (its error then).
	wait(ctx context.Context, after int64) error
	// finish ends the rollout as r.Result says, in one transaction:
	// completed (the new generations in force fleet-wide) or rolled back
	// (every node at the previous state); r goes to the history. It
	// returns the transaction's revision.
	finish(ctx context.Context, r *Rollout) (int64, error)
	// release gives the rollout up: it is paused.
	release(ctx context.Context) error
}

// nodeObs is what a driver reads of one node.
type nodeObs struct {
	live    bool // its status key exists (its agent keeps its lease)
	status  NodeStatus
	desired int64 // DesiredRevision
}

// etcdStore is a rollout kept in etcd. A driver holds the rollout with
// lease (the driver key is under it); AbortRollout uses one with no
// lease. Every write is guarded by the active key's ModRevision as this
// store last wrote or read it, and by the driver key's lease.
type etcdStore struct {
	c     *clientv3.Client
	l     Layout
	lease clientv3.LeaseID // 0: not a driver

	mu      sync.Mutex
	version int64 // the active key's ModRevision as last written or read
	cancel  context.CancelFunc
}

var _ rolloutStore = (*etcdStore)(nil)

// keepAlive keeps the store's lease alive until release.
func (s *etcdStore) keepAlive(ctx context.Context) error {
	kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ch, err := s.c.KeepAlive(kctx, s.lease)
	if err != nil {
		cancel()
		return fmt.Errorf("keeping the driver's lease alive: %w", err)
	}
	s.cancel = cancel
	go func() {
		for range ch { // drained until the lease is lost or released
		}
	}()
	return nil
}

func (s *etcdStore) guard() []clientv3.Cmp {
	s.mu.Lock()
	defer s.mu.Unlock()
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.l.RolloutActive()), "=", s.version)}
	if s.lease != 0 {
		cmps = append(cmps, clientv3.Compare(clientv3.LeaseValue(s.l.RolloutDriver()), "=", s.lease))
	}
	return cmps
}

// commit runs ops under the guard; a guard that fails is ErrRolloutLost,
// with what became of the rollout. Among ops, the put of proof (a key and
// the value put) tells whether the transaction committed when its answer
// is lost (a timeout, a member gone, ctx ended): a committed write is a
// success.
func (s *etcdStore) commit(ctx context.Context, r *Rollout, proof kvPut, ops ...clientv3.Op) (int64, error) {
	tr, err := s.c.Txn(ctx).If(s.guard()...).Then(ops...).Commit()
	var rev int64
	switch {
	case err == nil && !tr.Succeeded:
		return 0, s.lost(ctx, r)
	case err == nil:
		rev = tr.Header.Revision
	default:
		var ok bool
		if rev, ok = s.committed(ctx, proof); !ok {
			return 0, fmt.Errorf("writing rollout %s: %w", r.ID, err)
		}
	}
	s.mu.Lock()
	s.version = rev
	s.mu.Unlock()
	return rev, nil
}

// kvPut is a key and the value a transaction puts there.
type kvPut struct{ key, value string }

// committed tells, after a write's answer was lost, whether it committed:
// proof's key holds its value, written after the store's last known
// write; then also at which revision (the key's ModRevision: the
// transaction's).
func (s *etcdStore) committed(ctx context.Context, proof kvPut) (int64, bool) {
	cctx, cancel := cleanupCtx(ctx)
	defer cancel()
	resp, err := s.c.Get(cctx, proof.key)
	if err != nil || len(resp.Kvs) == 0 || string(resp.Kvs[0].Value) != proof.value {
		return 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if resp.Kvs[0].ModRevision <= s.version {
		return 0, false // the value of an earlier write
	}
	return resp.Kvs[0].ModRevision, true
}

// lost says why the driver no longer holds rollout r.
func (s *etcdStore) lost(ctx context.Context, r *Rollout) error {
	resp, err := s.c.Txn(ctx).Then(clientv3.OpGet(s.l.RolloutActive()), clientv3.OpGet(s.l.RolloutDriver())).Commit()
	if err != nil {
		return fmt.Errorf("%w: rollout %s changed under it (%v)", ErrRolloutLost, r.ID, err)
	}
	active, driver := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
	switch {
	case len(active) == 0:
		return fmt.Errorf("%w: rollout %s was finished meanwhile (aborted; see the rollout history)", ErrRolloutLost, r.ID)
	case len(driver) == 0:
		return fmt.Errorf("%w: its lease expired (%v without a keep-alive): rollout %s is paused", ErrRolloutLost, RolloutLeaseTTL, r.ID)
	case clientv3.LeaseID(driver[0].Lease) != s.lease:
		return fmt.Errorf("%w: rollout %s is driven by %s now", ErrRolloutLost, r.ID, driverName(driver[0].Value))
	}
	return fmt.Errorf("%w: rollout %s was changed by another writer", ErrRolloutLost, r.ID)
}

// driverName is the driver a driver key's value names.
func driverName(v []byte) string {
	var info RolloutDriverInfo
	if json.Unmarshal(v, &info) != nil || info.Driver == "" {
		return fmt.Sprintf("an unreadable driver (%q)", v)
	}
	return fmt.Sprintf("%s (since %s)", info.Driver, info.Since.Format("15:04:05"))
}

func (s *etcdStore) putRollout(r *Rollout) (clientv3.Op, kvPut, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return clientv3.Op{}, kvPut{}, err
	}
	return clientv3.OpPut(s.l.RolloutActive(), string(b)), kvPut{s.l.RolloutActive(), string(b)}, nil
}

func (s *etcdStore) save(ctx context.Context, r *Rollout) error {
	put, proof, err := s.putRollout(r)
	if err != nil {
		return err
	}
	_, err = s.commit(ctx, r, proof, put)
	return err
}

func (s *etcdStore) pinBatch(r *Rollout) int { return max((maxTxnOps-1)/len(r.Tables), 1) }

func (s *etcdStore) switchNodes(ctx context.Context, r *Rollout, nodes []string) error {
	put, proof, err := s.putRollout(r)
	if err != nil {
		return err
	}
	ops := []clientv3.Op{put}
	for _, node := range nodes {
		for _, t := range r.Tables {
			ops = append(ops, clientv3.OpPut(s.l.Pin(t.Table, node), t.New))
		}
	}
	_, err = s.commit(ctx, r, proof, ops...)
	return err
}

func (s *etcdStore) observe(ctx context.Context, r *Rollout, nodes []string, claimed bool) (map[string]nodeObs, int64, error) {
	resp, err := s.c.Txn(ctx).Then(clientv3.OpGet(s.l.RolloutActive()), clientv3.OpGet(s.l.RolloutDriver()),
		clientv3.OpGet(s.l.StatusPrefix(), clientv3.WithPrefix())).Commit()
	if err != nil {
		return nil, 0, fmt.Errorf("reading the nodes' statuses: %w", err)
	}
	if claimed {
		active, driver := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
		s.mu.Lock()
		held := len(active) == 1 && active[0].ModRevision == s.version && len(driver) == 1 && clientv3.LeaseID(driver[0].Lease) == s.lease
		s.mu.Unlock()
		if !held {
			return nil, 0, s.lost(ctx, r)
		}
	}
	want := map[string]bool{}
	for _, n := range nodes {
		want[n] = true
	}
	obs := make(map[string]nodeObs, len(nodes))
	for _, kv := range resp.Responses[2].GetResponseRange().Kvs {
		node := strings.TrimPrefix(string(kv.Key), s.l.StatusPrefix())
		if !want[node] {
			continue
		}
		o := nodeObs{live: true}
		if json.Unmarshal(kv.Value, &o.status) != nil {
			o.status = NodeStatus{Errors: []string{"status unreadable: not a node status"}}
		}
		obs[node] = o
	}
	desired, err := DesiredRevisions(ctx, s.c, s.l, r.Named, nodes)
	if err != nil {
		return nil, 0, err
	}
	for _, n := range nodes {
		o := obs[n]
		o.desired = desired[n]
		obs[n] = o
	}
	return obs, resp.Header.Revision, nil
}

// wait watches what a driver's reads depend on: the nodes' statuses, and
// the rollout's own keys (an abort, the driver key gone with its lease).
// Nothing else under the prefix can change while a rollout runs (applies
// are refused), and the objects' statuses, which change often, do not
// count.
func (s *etcdStore) wait(ctx context.Context, after int64) error {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	statuses := s.c.Watch(ctx, s.l.StatusPrefix(), clientv3.WithPrefix(), clientv3.WithRev(after+1))
	rollout := s.c.Watch(ctx, s.l.RolloutPrefix(), clientv3.WithPrefix(), clientv3.WithRev(after+1))
	for {
		var resp clientv3.WatchResponse
		var ok bool
		select {
		case resp, ok = <-statuses:
		case resp, ok = <-rollout:
		}
		if !ok {
			return ctx.Err()
		}
		if err := resp.Err(); err != nil {
			return err
		}
		if len(resp.Events) > 0 {
			return nil
		}
	}
}

func (s *etcdStore) finish(ctx context.Context, r *Rollout) (int64, error) {
	if r.Result != RolloutCompleted && r.Result != RolloutRolledBack {
		return 0, fmt.Errorf("finishing rollout %s: result %q", r.ID, r.Result)
	}
	ops, proof, err := s.finishOps(ctx, r)
	if err != nil {
		return 0, err
	}
	rev, err := s.commit(ctx, r, proof, ops...)
	if err != nil {
		return 0, err
	}
	// The nodes moved on; a failure only leaves garbage behind. (A delta
	// went in the transaction; its generation stays in force.)
	cctx, cancel := cleanupCtx(ctx)
	defer cancel()
	for _, t := range r.Tables {
		switch {
		case isDelta(t.New):
		case r.Result == RolloutCompleted:
			s.c.Delete(cctx, s.l.Generation(t.Table, ScopeAll, t.Old), clientv3.WithPrefix())
		default:
			s.c.Delete(cctx, s.l.Generation(t.Table, ScopeAll, t.New), clientv3.WithPrefix())
		}
	}
	return rev, nil
}

// finishOps are the operations of the transaction that finishes r: a
// completed delta's changes written into the generation in force; the
// current keys (the new generations, or the previous ones rewritten so
// that every node's desired revision moves past its pins); the pins
// removed, then the deltas; r put in the history (the oldest beyond
// RolloutHistoryKept deleted, at most maxHistoryTrim at once); the active
// and driver keys deleted. A node's watch reads them in this order: a
// node pinned to a generation that stays in force, or to a delta written
// into it, sees no change of state, and a node whose pin goes reads the
// generation in force as of the transaction. The put of r in the
// history is returned too: it proves the transaction committed.
func (s *etcdStore) finishOps(ctx context.Context, r *Rollout) ([]clientv3.Op, kvPut, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, kvPut{}, err
	}
	hist, err := historyTrim(ctx, s.c, s.l, r.ID)
	if err != nil {
		return nil, kvPut{}, err
	}
	var ops []clientv3.Op
	for _, t := range r.Tables {
		gen := t.Old
		switch {
		case r.Result == RolloutCompleted && isDelta(t.New):
			delta, err := s.deltaOps(ctx, t)
			if err != nil {
				return nil, kvPut{}, err
			}
			ops = append(ops, delta...)
		case r.Result == RolloutCompleted:
			gen = t.New
		}
		ops = append(ops, clientv3.OpPut(s.l.Current(t.Table, ScopeAll), gen))
	}
	for _, t := range r.Tables {
		ops = append(ops, clientv3.OpDelete(s.l.PinPrefix(t.Table), clientv3.WithPrefix()))
	}
	for _, t := range r.Tables {
		if isDelta(t.New) {
			ops = append(ops, clientv3.OpDelete(s.l.Delta(t.Table, t.New), clientv3.WithPrefix()))
		}
	}
	proof := kvPut{s.l.RolloutHistory() + r.ID, string(b)}
	ops = append(ops, clientv3.OpPut(proof.key, proof.value),
		clientv3.OpDelete(s.l.RolloutActive()), clientv3.OpDelete(s.l.RolloutDriver()))
	return append(ops, hist...), proof, nil
}

// historyTrim returns the deletes that keep the history at
// RolloutHistoryKept once an entry named id is put: the oldest beyond it
// (by creation), at most maxHistoryTrim at once.
func historyTrim(ctx context.Context, c *clientv3.Client, l Layout, id string) ([]clientv3.Op, error) {
	hist, err := c.Get(ctx, l.RolloutHistory(), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("reading the rollout history: %w", err)
	}
	keys := make([]string, 0, len(hist.Kvs))
	for _, kv := range hist.Kvs {
		if k := string(kv.Key); k != l.RolloutHistory()+id {
			keys = append(keys, k)
		}
	}
	var ops []clientv3.Op
	for _, k := range keys[:min(max(len(keys)-(RolloutHistoryKept-1), 0), maxHistoryTrim)] {
		ops = append(ops, clientv3.OpDelete(k))
	}
	return ops, nil
}

// maxHistoryTrim is how many old history keys one finish deletes at most,
// so that its transaction stays within etcd's limit.
const maxHistoryTrim = 3

// deltaOps are the writes that put a completed delta's change into its
// table's generation in force.
func (s *etcdStore) deltaOps(ctx context.Context, t RolloutTable) ([]clientv3.Op, error) {
	prefix := s.l.Delta(t.Table, t.New)
	resp, err := s.c.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", prefix, err)
	}
	gen := s.l.Generation(t.Table, ScopeAll, t.Old)
	var ops []clientv3.Op
	for _, kv := range resp.Kvs {
		switch op, name, _ := strings.Cut(string(kv.Key[len(prefix):]), "/"); op {
		case "put":
			ops = append(ops, clientv3.OpPut(gen+name, string(kv.Value)))
		case "del":
			ops = append(ops, clientv3.OpDelete(gen+name))
		default:
			return nil, fmt.Errorf("%s: not put/NAME or del/NAME of a delta", kv.Key)
		}
	}
	return ops, nil
}

func (s *etcdStore) release(ctx context.Context) error {
	if s.lease == 0 {
		return nil
	}
	if s.cancel != nil {
		s.cancel()
	}
	cctx, cancel := cleanupCtx(ctx)
	defer cancel()
	if _, err := s.c.Revoke(cctx, s.lease); err != nil {
		return fmt.Errorf("revoking the driver's lease (the rollout is paused once it expires, within %v): %w", RolloutLeaseTTL, err)
	}
	return nil
}

var errFinished = errors.New("the rollout is finished")
