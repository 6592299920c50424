package etcd_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/steadystate/steadystate/etcd"
	"github.com/steadystate/steadystate/etcd/etcdtest"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reflector"
	"github.com/steadystate/steadystate/statedb"
)

// memTarget is an in-memory real system. It refuses a value that starts
// with "fail", and remembers every value it ever held.
type memTarget struct {
	mu    sync.Mutex
	state map[string]string
	ever  map[string]bool // "NAME=VALUE"
}

func (m *memTarget) Update(_ context.Context, _ statedb.ReadTxn, o *obj) error {
	if strings.HasPrefix(o.Value, "fail") {
		return fmt.Errorf("refused value %q", o.Value)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.state[o.Name] = o.Value
	if m.ever != nil {
		m.ever[o.Name+"="+o.Value] = true
	}
	return nil
}

// snapshot returns the state and whether it ever held name=value.
func (m *memTarget) snapshot(name, value string) (map[string]string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.state), m.ever[name+"="+value]
}

func (m *memTarget) Delete(_ context.Context, _ statedb.ReadTxn, o *obj) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.state, o.Name)
	return nil
}

func (m *memTarget) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*obj, statedb.Revision]) error {
	return nil
}

// simAgent is what an agent in fleet mode runs: a reflector from etcd
// into its table, a reconciler to an in-memory target, and a status
// publisher that reports the revision reached once the reconciler has
// caught up with the table.
type simAgent struct {
	name   string
	db     *statedb.DB
	table  statedb.RWTable[*obj]
	refl   *reflector.Reflector[[]byte, *obj]
	rec    reconciler.Reconciler[*obj]
	pub    *etcd.Publisher
	target *memTarget
	lists  *listCounter     // the reflector's lists of its source
	client *clientv3.Client // its own, closed with the fleet; nil if shared
}

func startAgent(ctx context.Context, b testing.TB, c *clientv3.Client, l etcd.Layout, name string, wg *sync.WaitGroup) *simAgent {
	a, err := newSimAgent(ctx, c, l, name)
	if err != nil {
		b.Fatal(err)
	}
	wg.Add(3)
	go func() { defer wg.Done(); a.refl.Run(ctx) }()
	go func() { defer wg.Done(); a.rec.Run(ctx) }()
	go func() { defer wg.Done(); a.report(ctx) }()
	return a
}

// newSimAgent builds an agent and claims its node name (its publisher
// runs); the caller runs its reflector, reconciler and report loop.
func newSimAgent(ctx context.Context, c *clientv3.Client, l etcd.Layout, name string) (*simAgent, error) {
	a := &simAgent{name: name, db: statedb.New(), target: &memTarget{state: map[string]string{}, ever: map[string]bool{}},
		lists: &listCounter{lists: map[string]int{}}}
	var err error
	if a.table, err = statedb.NewTable(a.db, "objs", nameIndex, reconciler.StatusIndex(func(o *obj) reconciler.Status { return o.Status })); err != nil {
		return nil, err
	}
	src, err := etcd.NewSource(c, l, "objs", name)
	if err != nil {
		return nil, err
	}
	quiet := slog.New(slog.DiscardHandler)
	a.refl, err = reflector.New(a.db, reflector.Config[[]byte, *obj]{
		Name: "objs", Source: src,
		Writer: reconciler.DesiredWriter[*obj]{Table: a.table, Equal: func(x, y *obj) bool { return x.Value == y.Value },
			SetObjectStatus: func(o *obj, s reconciler.Status) *obj { o.Status = s; return o }},
		Transform:     func(k string, v []byte) (*obj, error) { return &obj{Name: k, Value: string(v)}, nil },
		BatchInterval: 10 * time.Millisecond,
		Metrics:       a.lists,
		Logger:        quiet,
	})
	if err != nil {
		return nil, err
	}
	a.rec, err = reconciler.New(a.db, reconciler.Config[*obj]{
		Name: "mem", Table: a.table, Target: a.target,
		GetObjectStatus: func(o *obj) reconciler.Status { return o.Status },
		SetObjectStatus: func(o *obj, s reconciler.Status) *obj { o.Status = s; return o },
		CloneObject:     func(o *obj) *obj { x := *o; return &x },
		Logger:          quiet,
	})
	if err != nil {
		return nil, err
	}
	a.pub, err = etcd.StartPublisher(ctx, etcd.PublisherConfig{Client: c, Layout: l, Node: name, Logger: quiet},
		etcd.NodeStatus{})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// relists is how many times the agent's reflector listed its source.
func (a *simAgent) relists() int {
	a.lists.mu.Lock()
	defer a.lists.mu.Unlock()
	return a.lists.lists["objs"]
}

// report publishes the revision reached and the counts by status whenever
// the table or the revision changed and the reconciler has caught up with
// the table. (The revision can move without a change to the table: a
// relist that found nothing new.)
func (a *simAgent) report(ctx context.Context) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var lastReached uint64
	var lastRev statedb.Revision
	for {
		reached := a.refl.Revision() // before the table: its changes are in it
		txn := a.db.ReadTxn()
		rev := a.table.Revision(txn)
		_, watch := a.table.AllWatch(txn)
		if reached > 0 && (reached != lastReached || rev != lastRev) {
			if a.publish(ctx, reached, rev) {
				lastReached, lastRev = reached, rev
			} else if ctx.Err() != nil {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-watch:
		case <-tick.C:
		}
	}
}

// publish waits until the reconciler attempted the table up to rev, then
// publishes the revision reached and the objects by status. It returns
// false when it did not (ctx ended, or the wait failed otherwise).
func (a *simAgent) publish(ctx context.Context, reached uint64, rev statedb.Revision) bool {
	_, err := a.rec.WaitUntilReconciled(ctx, rev)
	// Every object attempted: failures are reported too.
	if nr := (*reconciler.NotReconciledError)(nil); ctx.Err() != nil || (err != nil && !errors.As(err, &nr)) {
		return false
	}
	// The few not Done, through the status index; Done is the rest.
	txn := a.db.ReadTxn()
	counts := map[string]int{"Done": a.table.NumObjects(txn)}
	getStatus := func(o *obj) reconciler.Status { return o.Status }
	for kind, n := range reconciler.CountByStatus(txn, a.table, getStatus,
		reconciler.StatusKindPending, reconciler.StatusKindRefreshing, reconciler.StatusKindError) {
		counts[kind.String()] = n
		counts["Done"] -= n
	}
	var errs []string
	if counts["Error"] > 0 {
		for o := range a.table.All(txn) {
			if o.Status.Kind == reconciler.StatusKindError && len(errs) < 3 {
				errs = append(errs, o.Name+": "+o.Status.Error)
			}
		}
	}
	a.pub.Publish(etcd.NodeStatus{Revision: int64(reached), Objects: counts, Errors: errs})
	return true
}

// fleetWatch follows the nodes' statuses through an etcd watch. While
// waitApplied waits for a revision, the watch counts the nodes that
// report it applied as their statuses arrive (one waiter at a time), so
// that a thousand nodes' reports cost the waiter no scan each.
type fleetWatch struct {
	mu      sync.Mutex
	nodes   map[string]etcd.NodeStatus
	writes  int
	waitRev int64 // waitApplied's revision, 0 when none waits
	applied int   // nodes whose status says waitRev applied
	changed chan struct{}
}

func watchFleet(ctx context.Context, c *clientv3.Client, l etcd.Layout) *fleetWatch {
	f := &fleetWatch{nodes: map[string]etcd.NodeStatus{}, changed: make(chan struct{}, 1)}
	ch := c.Watch(ctx, l.StatusPrefix(), clientv3.WithPrefix())
	go func() {
		for resp := range ch {
			f.mu.Lock()
			for _, ev := range resp.Events {
				f.writes++
				key := string(ev.Kv.Key)
				if old, ok := f.nodes[key]; ok && f.waitRev != 0 && old.Applied(f.waitRev) {
					f.applied--
				}
				if ev.Type == clientv3.EventTypeDelete {
					delete(f.nodes, key)
					continue
				}
				var st etcd.NodeStatus
				if json.Unmarshal(ev.Kv.Value, &st) == nil {
					f.nodes[key] = st
				} else {
					delete(f.nodes, key)
					continue
				}
				if f.waitRev != 0 && st.Applied(f.waitRev) {
					f.applied++
				}
			}
			f.mu.Unlock()
			select {
			case f.changed <- struct{}{}:
			default:
			}
		}
	}()
	return f
}

// waitApplied waits until n nodes report rev applied.
func (f *fleetWatch) waitApplied(b testing.TB, rev int64, n int) {
	f.mu.Lock()
	f.waitRev, f.applied = rev, 0
	for _, st := range f.nodes {
		if st.Applied(rev) {
			f.applied++
		}
	}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.waitRev = 0
		f.mu.Unlock()
	}()
	deadline := time.After(5 * time.Minute)
	for {
		f.mu.Lock()
		done := f.applied
		f.mu.Unlock()
		if done >= n {
			return
		}
		select {
		case <-f.changed:
		case <-deadline:
			f.mu.Lock()
			var sample []etcd.NodeStatus
			for _, st := range f.nodes {
				if len(sample) < 3 && !st.Applied(rev) {
					sample = append(sample, st)
				}
			}
			seen := len(f.nodes)
			f.mu.Unlock()
			b.Fatalf("only %d of %d nodes applied revision %d after 5 minutes (%d reporting; some that did not: %+v)", done, n, rev, seen, sample)
		}
	}
}

func (f *fleetWatch) numWrites() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writes
}

// BenchmarkFleet runs 100 simulated agents (10 with -short), each with its
// own DB, reflector, reconciler and status publisher, against a 3-member
// etcd cluster on loopback, with 10,000 desired objects (1,000 with
// -short). It reports the initial sync of every agent, the time from a
// fleet apply of one changed object until every agent reports it applied
// (p50 and p99 over rounds half a second apart, as changes come from
// people or a controller), and the etcd writes per second that the status
// reports cause while one object changes after another without pause for
// five seconds (the publishers' rate limit coalesces them).
func BenchmarkFleet(b *testing.B) {
	agents, objects, rounds := 100, 10_000, 40
	if testing.Short() {
		agents, objects, rounds = 10, 1_000, 10
	}
	if v, err := strconv.Atoi(os.Getenv("FLEET_AGENTS")); err == nil {
		agents = v // for trying other sizes by hand
	}
	if v, err := strconv.Atoi(os.Getenv("FLEET_OBJECTS")); err == nil {
		objects = v
	}
	b.Run(fmt.Sprintf("agents=%d/objects=%d", agents, objects), func(b *testing.B) {
		// One run takes seconds: b.N is 1 unless -benchtime asks for more.
		for range b.N {
			fleetOnce(b, agents, objects, rounds)
		}
	})
}

func fleetOnce(b *testing.B, agents, objects, rounds int) {
	b.StopTimer()
	f := newBenchFleet(b, objects)
	defer f.stop()
	ctx, c, l, desired, fleet := f.ctx, f.c, f.l, f.desired, f.fleet
	b.StartTimer()
	start := time.Now()
	f.startAgents(agents)
	initial := time.Since(start)

	change := func(r int) int64 {
		desired["o"+strconv.Itoa(r*7919%objects)] = []byte("v" + strconv.Itoa(r+1))
		rev, err := etcd.Apply(ctx, c, l, "objs", etcd.ScopeAll, desired)
		if err != nil {
			b.Fatal(err)
		}
		return rev
	}
	var lat []time.Duration
	for r := range rounds {
		time.Sleep(500 * time.Millisecond)
		t0 := time.Now()
		fleet.waitApplied(b, change(r), agents)
		lat = append(lat, time.Since(t0))
	}
	writesBefore, churnStart := fleet.numWrites(), time.Now()
	r := rounds
	for time.Since(churnStart) < 5*time.Second {
		change(r)
		r++
	}
	fleet.waitApplied(b, change(r), agents)
	churn := time.Since(churnStart)
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(initial.Seconds(), "initial-sync-s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-apply-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-apply-ms")
	writes := float64(fleet.numWrites() - writesBefore)
	b.ReportMetric(writes/churn.Seconds(), "status-writes/s")
	b.ReportMetric(writes/churn.Seconds()/float64(agents), "status-writes/s/agent")
}

// benchFleet is the fleet the fleet and rollout benchmarks run: a 3-member
// etcd holding objects desired fleet-wide, a watch of every node's status,
// and simulated agents, until stop (the cluster until the benchmark ends).
type benchFleet struct {
	b       *testing.B
	ctx     context.Context
	cancel  context.CancelFunc
	cl      *etcdtest.Cluster
	c       *clientv3.Client
	l       etcd.Layout
	desired map[string][]byte // as applied at rev
	rev     int64
	fleet   *fleetWatch
	agents  []*simAgent
	wg      sync.WaitGroup
}

// newBenchFleet starts the cluster and applies objects objects ("o0".."oN"
// = "v0") fleet-wide.
func newBenchFleet(b *testing.B, objects int) *benchFleet {
	f := &benchFleet{b: b, cl: etcdtest.StartCluster(b, etcdtest.Binary(b), 3)}
	f.c = f.cl.Client()
	ctx := f.start()
	f.desired = map[string][]byte{}
	for i := range objects {
		f.desired["o"+strconv.Itoa(i)] = []byte("v0")
	}
	var err error
	if f.rev, err = etcd.Apply(ctx, f.c, f.l, "objs", etcd.ScopeAll, f.desired); err != nil {
		f.stop()
		b.Fatal(err)
	}
	f.fleet = watchFleet(ctx, f.c, f.l)
	return f
}

func (f *benchFleet) start() context.Context {
	f.ctx, f.cancel = context.WithCancel(context.Background())
	return f.ctx
}

// stop stops the agents and the fleet's watch; the publishers leave the
// fleet 50 at a time.
func (f *benchFleet) stop() {
	f.cancel()
	f.wg.Wait()
	sem := make(chan struct{}, 50)
	var stopped sync.WaitGroup
	for _, a := range f.agents {
		sem <- struct{}{}
		stopped.Add(1)
		go func() {
			defer stopped.Done()
			defer func() { <-sem }()
			a.pub.Stop(context.Background())
			if a.client != nil {
				a.client.Close()
			}
		}()
	}
	stopped.Wait()
}

// startAgents starts n agents ("node000".."nodeN") and waits until every
// one applied the first state. Ten clients serve them, as if ten agents
// shared a connection pool: n gRPC connections would measure the loopback
// more than etcd.
func (f *benchFleet) startAgents(n int) {
	var clients []*clientv3.Client
	for range min(n, 10) {
		clients = append(clients, f.cl.Client())
	}
	for i := range n {
		f.agents = append(f.agents, startAgent(f.ctx, f.b, clients[i%len(clients)], f.l, fmt.Sprintf("node%03d", i), &f.wg))
	}
	f.fleet.waitApplied(f.b, f.rev, n)
}
