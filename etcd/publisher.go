package etcd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrNodeTaken is wrapped by Publisher.Start's error when a live agent
// already publishes the node's status: two agents may not share a node
// name.
var ErrNodeTaken = errors.New("node name in use by a live agent")

// DefaultSeenInterval is PublisherConfig.SeenInterval's default: a node
// whose status does not change for hours rewrites its record every
// minute, one small write per node and minute.
const DefaultSeenInterval = time.Minute

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	Client *clientv3.Client
	Layout Layout
	Node   string
	// TTL is the lease's: the status disappears this long after the
	// agent stops keeping it alive (a crash), and the node is lost.
	// Default 10s.
	TTL time.Duration
	// SeenInterval is how often the node's record (NodeRecord) is written
	// again when the status does not change, so that a lost node's
	// LastSeen is at most this old when its lease expires. Default
	// DefaultSeenInterval.
	SeenInterval time.Duration
	// MinInterval is the average least time between two status writes,
	// with bursts of up to Burst writes: a change after a quiet spell is
	// written at once, and under churn changes coalesce into at most one
	// write per MinInterval. Default 500ms.
	MinInterval time.Duration
	// Burst is how many writes may follow each other without waiting.
	// Default 3.
	Burst int
	// ObjectStatuses makes the publisher keep, beside the node's summary,
	// one key per object given to PublishObjects (Layout.ObjectStatus),
	// under the same lease and rate limit. Off by default: a fleet of N
	// nodes with M objects holds N×M such keys.
	ObjectStatuses bool
	Logger         *slog.Logger
}

// Publisher keeps a node's status in etcd: under a lease kept alive while
// it runs, written only when it changed, at most Burst writes at once and
// one per MinInterval on average (a token bucket). With every status write,
// in the same transaction, and at least every SeenInterval, it writes the
// node's record (Layout.Record, no lease), which outlives a crash: the
// fleet view lists the node as lost until Forget. Stop deletes both: a
// node that stopped cleanly is not lost.
//
// Only the holder of the node's status key writes the record: a status
// write is under the publisher's lease (it fails once the lease is gone),
// and a record written alone is guarded by the status key's lease. So an
// agent cut off past its TTL, whose node name another agent took, never
// overwrites that agent's record.
type Publisher struct {
	cfg   PublisherConfig
	key   string
	lease clientv3.LeaseID

	mu      sync.Mutex
	latest  []byte // the status to write
	written []byte // the status last written
	// Per-object statuses (ObjectStatuses): table → name → JSON, the
	// latest given and the last written (nil after a lost lease: all are
	// written again).
	latestObjs, writtenObjs map[string]map[string]string
	wake                    chan struct{}
	writes, records         int
	done                    chan struct{}
	cancel                  context.CancelFunc
}

// StartPublisher grants the lease, claims the node's status key (failing
// with ErrNodeTaken if a live agent holds it) with the initial status, and
// keeps both alive until Stop.
func StartPublisher(ctx context.Context, cfg PublisherConfig, initial NodeStatus) (*Publisher, error) {
	if cfg.Client == nil {
		return nil, errors.New("etcd publisher: client is nil")
	}
	if err := checkName("node", cfg.Node); err != nil {
		return nil, fmt.Errorf("etcd publisher: %w", err)
	}
	if cfg.TTL == 0 {
		cfg.TTL = 10 * time.Second
	}
	if cfg.SeenInterval <= 0 {
		cfg.SeenInterval = DefaultSeenInterval
	}
	if cfg.MinInterval == 0 {
		cfg.MinInterval = 500 * time.Millisecond
	}
	if cfg.Burst <= 0 {
		cfg.Burst = 3
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	initial.Node = cfg.Node
	data, err := json.Marshal(initial)
	if err != nil {
		return nil, err
	}
	lease, err := cfg.Client.Grant(ctx, leaseSeconds(cfg.TTL))
	if err != nil {
		return nil, fmt.Errorf("etcd publisher: granting a lease: %w", err)
	}
	key := cfg.Layout.Status(cfg.Node)
	claim, err := cfg.Client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(data), clientv3.WithLease(lease.ID)), recordOp(cfg.Layout, cfg.Node, data)).Commit()
	if err == nil && !claim.Succeeded {
		err = fmt.Errorf("%w: %s exists (another agent runs as %q; it goes when its lease expires)", ErrNodeTaken, key, cfg.Node)
	}
	if err != nil {
		revokeSoon(ctx, cfg.Client, lease.ID)
		return nil, fmt.Errorf("etcd publisher: %w", err)
	}
	// The keep-alive ends with the publisher (Stop), even if the revoke
	// then fails: the lease expires after its TTL.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	keep, err := cfg.Client.KeepAlive(runCtx, lease.ID)
	if err != nil {
		cancel()
		revokeSoon(ctx, cfg.Client, lease.ID)
		return nil, fmt.Errorf("etcd publisher: keeping the lease alive: %w", err)
	}
	p := &Publisher{cfg: cfg, key: key, lease: lease.ID, latest: data, written: data, writes: 1,
		wake: make(chan struct{}, 1), done: make(chan struct{}), cancel: cancel}
	go p.run(runCtx, keep)
	return p, nil
}

// leaseSeconds is ttl in whole seconds, rounded up (at least 1).
func leaseSeconds(ttl time.Duration) int64 {
	return max(int64((ttl+time.Second-1)/time.Second), 1)
}

// revokeSoon revokes lease after ctx's work failed, without waiting more
// than cleanupTimeout for a cluster that may be gone.
func revokeSoon(ctx context.Context, c *clientv3.Client, lease clientv3.LeaseID) {
	cctx, cancel := cleanupCtx(ctx)
	defer cancel()
	c.Revoke(cctx, lease)
}

// Publish sets the status to write; it returns at once.
func (p *Publisher) Publish(st NodeStatus) {
	st.Node = p.cfg.Node
	data, err := json.Marshal(st)
	if err != nil {
		p.cfg.Logger.Error("Cannot encode the node status", "error", err)
		return
	}
	p.mu.Lock()
	p.latest = data
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// PublishObjects sets the statuses of table's objects (name → status) to
// keep under their keys: changed ones are written, those no longer in
// objects deleted, with the next write of the summary. It does nothing
// unless PublisherConfig.ObjectStatuses is set; it returns at once.
func (p *Publisher) PublishObjects(table string, objects map[string]ObjectStatus) {
	if !p.cfg.ObjectStatuses {
		return
	}
	enc := make(map[string]string, len(objects))
	for name, st := range objects {
		if checkName("object name", name) != nil {
			p.cfg.Logger.Error("Object status not kept: bad name", "table", table, "name", name)
			continue
		}
		b, _ := json.Marshal(st)
		enc[name] = string(b)
	}
	p.mu.Lock()
	if p.latestObjs == nil {
		p.latestObjs = map[string]map[string]string{}
	}
	p.latestObjs[table] = enc
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// objectOps returns the operations that make the object status keys
// match the latest statuses, under lease (p.mu held).
func (p *Publisher) objectOps(lease clientv3.LeaseID) []clientv3.Op {
	var ops []clientv3.Op
	for _, table := range slices.Sorted(maps.Keys(p.latestObjs)) {
		want, have := p.latestObjs[table], p.writtenObjs[table]
		for _, name := range slices.Sorted(maps.Keys(want)) {
			if v, ok := have[name]; !ok || v != want[name] {
				ops = append(ops, clientv3.OpPut(p.cfg.Layout.ObjectStatus(p.cfg.Node, table, name), want[name], clientv3.WithLease(lease)))
			}
		}
		for _, name := range slices.Sorted(maps.Keys(have)) {
			if _, ok := want[name]; !ok {
				ops = append(ops, clientv3.OpDelete(p.cfg.Layout.ObjectStatus(p.cfg.Node, table, name)))
			}
		}
	}
	return ops
}

// copyObjs copies the latest object statuses, to be the written ones.
func copyObjs(m map[string]map[string]string) map[string]map[string]string {
	c := make(map[string]map[string]string, len(m))
	for t, byName := range m {
		c[t] = maps.Clone(byName)
	}
	return c
}

// Writes returns how many times the status was written (the claim
// included).
func (p *Publisher) Writes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.writes
}

// recordOp writes node's record with the status data, seen now.
func recordOp(l Layout, node string, data []byte) clientv3.Op {
	var rec NodeRecord
	json.Unmarshal(data, &rec.NodeStatus) // data is Publish's own encoding
	rec.LastSeen = time.Now().UTC()
	b, _ := json.Marshal(rec)
	return clientv3.OpPut(l.Record(node), string(b))
}

// Stop ends the publisher, deletes the node's status and record in one
// transaction (the node leaves the fleet view at once, not lost), and
// revokes the lease. The record is deleted only while the status key is
// this publisher's or nobody's: another agent that took the node name
// keeps its own. If etcd cannot be reached, Stop fails and the node shows
// as lost once the lease expires (a crashed agent's does too).
func (p *Publisher) Stop(ctx context.Context) error {
	p.cancel()
	<-p.done
	p.mu.Lock()
	lease := p.lease
	p.mu.Unlock()
	l, node := p.cfg.Layout, p.cfg.Node
	ours := clientv3.Compare(clientv3.LeaseValue(p.key), "=", lease)
	free := clientv3.Compare(clientv3.CreateRevision(p.key), "=", 0)
	_, err := p.cfg.Client.Txn(ctx).If(ours).
		Then(clientv3.OpDelete(p.key), clientv3.OpDelete(l.Record(node)), clientv3.OpDelete(l.ObjectStatusPrefix(node), clientv3.WithPrefix())).
		Else(clientv3.OpTxn([]clientv3.Cmp{free}, []clientv3.Op{clientv3.OpDelete(l.Record(node))}, nil)).Commit()
	if err != nil {
		err = fmt.Errorf("deleting the status of node %s: %w", node, err)
	}
	if _, rerr := p.cfg.Client.Revoke(ctx, lease); rerr != nil {
		err = errors.Join(err, fmt.Errorf("revoking the status lease: %w", rerr))
	}
	return err
}

// run writes the latest status when it changed, within the token bucket,
// and drains the lease's keep-alive answers.
func (p *Publisher) run(ctx context.Context, keep <-chan *clientv3.LeaseKeepAliveResponse) {
	defer close(p.done)
	tokens, filled := float64(p.cfg.Burst-1), time.Now() // the claim took one
	var timer <-chan time.Time
	seen := time.NewTimer(p.cfg.SeenInterval) // the record is written again when it fires
	defer seen.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-seen.C:
			p.seen(ctx)
			seen.Reset(p.cfg.SeenInterval)
			continue
		case _, ok := <-keep:
			if !ok {
				// The lease is lost (a partition longer than its TTL, a
				// restarted cluster): the status is gone from the fleet
				// view. Claim the node's key again under a new lease.
				p.cfg.Logger.Warn("The status lease is lost; claiming the node again", "node", p.cfg.Node)
				if keep = p.reclaim(ctx); keep == nil {
					return // stopped meanwhile
				}
				seen.Reset(p.cfg.SeenInterval) // the claim wrote the record
			} else {
				continue
			}
		case <-p.wake:
		case <-timer:
			timer = nil
		}
		if timer != nil {
			continue // a write is already scheduled
		}
		now := time.Now()
		tokens = min(float64(p.cfg.Burst), tokens+float64(now.Sub(filled))/float64(p.cfg.MinInterval))
		filled = now
		if tokens < 1 {
			timer = time.After(time.Duration((1 - tokens) * float64(p.cfg.MinInterval)))
			continue
		}
		p.mu.Lock()
		data, same, lease := p.latest, bytes.Equal(p.latest, p.written), p.lease
		objOps, objs := p.objectOps(lease), copyObjs(p.latestObjs)
		p.mu.Unlock()
		if same && len(objOps) == 0 {
			continue
		}
		var ops []clientv3.Op
		if !same {
			ops = append(ops, clientv3.OpPut(p.key, string(data), clientv3.WithLease(lease)), recordOp(p.cfg.Layout, p.cfg.Node, data))
		}
		if err := p.commit(ctx, append(ops, objOps...)); err != nil {
			if ctx.Err() == nil {
				p.cfg.Logger.Warn("Writing the node status failed", "error", err)
				timer = time.After(p.cfg.MinInterval)
			}
			continue
		}
		tokens--
		if !same {
			seen.Reset(p.cfg.SeenInterval)
		}
		p.mu.Lock()
		p.written = data
		p.writtenObjs = objs
		p.writes++
		p.mu.Unlock()
	}
}

// seen writes the node's record again with the status last written, if
// the status key is still under the publisher's lease (else the lease is
// lost, and the claim that follows writes the record).
func (p *Publisher) seen(ctx context.Context) {
	p.mu.Lock()
	data, lease := p.written, p.lease
	p.mu.Unlock()
	tr, err := p.cfg.Client.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue(p.key), "=", lease)).
		Then(recordOp(p.cfg.Layout, p.cfg.Node, data)).Commit()
	if err != nil {
		if ctx.Err() == nil {
			p.cfg.Logger.Warn("Writing the node record failed", "node", p.cfg.Node, "error", err)
		}
		return
	}
	if tr.Succeeded {
		p.mu.Lock()
		p.records++
		p.mu.Unlock()
	}
}

// Records returns how many times the node's record was written again
// with an unchanged status (every SeenInterval).
func (p *Publisher) Records() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.records
}

// commit runs ops in transactions within etcd's operation limit (one,
// unless many object statuses changed at once).
func (p *Publisher) commit(ctx context.Context, ops []clientv3.Op) error {
	for len(ops) > 0 {
		n := min(len(ops), maxTxnOps)
		if _, err := p.cfg.Client.Txn(ctx).Then(ops[:n]...).Commit(); err != nil {
			return err
		}
		ops = ops[n:]
	}
	return nil
}

// reclaim grants a new lease and claims the node's status key with it,
// retrying with backoff until it succeeds or ctx ends (nil then). A key
// held by another live agent (it took the name while this one was cut
// off) is retried too, and logged: its lease must expire first.
func (p *Publisher) reclaim(ctx context.Context) <-chan *clientv3.LeaseKeepAliveResponse {
	for attempt := 1; ; attempt++ {
		keep, err := p.claim(ctx)
		if err == nil {
			p.cfg.Logger.Info("Claimed the node again", "node", p.cfg.Node)
			return keep
		}
		p.cfg.Logger.Warn("Claiming the node failed", "node", p.cfg.Node, "error", err, "attempt", attempt)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(reclaimWait(attempt)):
		}
	}
}

// reclaimWait is the wait before the reclaim that follows the given number
// of failed attempts: 100ms doubling up to 10s, with up to a quarter of
// jitter (within the cap), so that a fleet cut off at once does not come
// back in lockstep.
func reclaimWait(attempts int) time.Duration {
	const first, most = 100 * time.Millisecond, 10 * time.Second
	d := first
	for i := 1; i < attempts && d < most; i++ {
		d *= 2
	}
	d = min(d, most)
	return min(d+time.Duration(rand.Int64N(int64(d)/4+1)), most)
}

// claim grants a lease, puts the latest status under it if the key is free
// or ours (the old lease's), and keeps the lease alive.
func (p *Publisher) claim(ctx context.Context) (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	lease, err := p.cfg.Client.Grant(ctx, leaseSeconds(p.cfg.TTL))
	if err != nil {
		return nil, fmt.Errorf("granting a lease: %w", err)
	}
	p.mu.Lock()
	data, old := p.latest, p.lease
	p.mu.Unlock()
	free := clientv3.Compare(clientv3.CreateRevision(p.key), "=", 0)
	ours := clientv3.Compare(clientv3.LeaseValue(p.key), "=", old)
	put, record := clientv3.OpPut(p.key, string(data), clientv3.WithLease(lease.ID)), recordOp(p.cfg.Layout, p.cfg.Node, data)
	tr, err := p.cfg.Client.Txn(ctx).If(free).Then(put, record).Else(
		clientv3.OpTxn([]clientv3.Cmp{ours}, []clientv3.Op{put, record}, nil)).Commit()
	if err == nil && !tr.Succeeded && !tr.Responses[0].GetResponseTxn().Succeeded {
		err = fmt.Errorf("%w: %s is held by another agent's lease", ErrNodeTaken, p.key)
	}
	if err != nil {
		revokeSoon(ctx, p.cfg.Client, lease.ID)
		return nil, err
	}
	keep, err := p.cfg.Client.KeepAlive(ctx, lease.ID)
	if err != nil {
		revokeSoon(ctx, p.cfg.Client, lease.ID)
		return nil, fmt.Errorf("keeping the lease alive: %w", err)
	}
	p.mu.Lock()
	p.lease = lease.ID
	p.written = data
	p.writtenObjs = nil // gone with the old lease
	p.writes++
	p.mu.Unlock()
	return keep, nil
}
