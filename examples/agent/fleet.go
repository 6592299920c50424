package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/steadystate/steadystate/etcd"
	"github.com/steadystate/steadystate/examples/iptables"
	"github.com/steadystate/steadystate/examples/routes"
	"github.com/steadystate/steadystate/examples/sysctl"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/job"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reflector"
	"github.com/steadystate/steadystate/reflector/reflectorcell"
	"github.com/steadystate/steadystate/statedb"
)

// Fleet mode (--etcd-endpoints): the desired state comes from etcd instead
// of a file, and the node's status goes back to etcd.
//
// The path of a desired object: `agent fleet apply` validates a desired
// file like the loader and writes the three tables' objects with
// etcd.ApplyTables, one etcd key per object (its name: fleetName of its
// primary key, its value: the object as JSON, without status), fleet-wide
// or for one node; each agent's one reflector (a reflector.Multi) lists and
// watches the three tables' keys through one etcd.Source and commits each
// etcd revision to all three tables in one transaction, through their
// DesiredWriters, so the node switches from one apply to the next whole;
// the reconcilers apply them as in file mode; the status reporter
// publishes the node's summary (the revision reached: one number, the
// reflector's; counts by status; the latest errors) under a lease, and
// `agent fleet status` reads every node's.
//
// Everything else is the same as with a file: the namespace, the status
// API, the durable record, prune only after the first complete list.

// fleetTables are the tables fleet mode fills, as named in etcd.
var fleetTables = []string{sysctl.TableName, routes.TableName, iptables.TableName}

// fleetMode reports whether cfg takes its desired state from etcd.
func (c AgentConfig) fleetMode() bool { return len(c.EtcdEndpoints) > 0 }

// etcdOptions are the flags of every command that talks to etcd.
type etcdOptions struct {
	Endpoints             []string
	Prefix                string
	CACert, Cert, CertKey string
}

// etcdFlags adds the etcd flags to fs; defaults as for `agent run`.
func (o *etcdOptions) flags(fs interface {
	StringSliceVar(*[]string, string, []string, string)
	StringVar(*string, string, string, string)
}) {
	fs.StringSliceVar(&o.Endpoints, "etcd-endpoints", nil, "etcd endpoints, HOST:PORT or URL, comma-separated")
	fs.StringVar(&o.Prefix, "etcd-prefix", etcd.DefaultPrefix, "key prefix of the fleet's desired state and statuses in etcd")
	fs.StringVar(&o.CACert, "etcd-cacert", "", "CA certificate file to verify the etcd servers (TLS)")
	fs.StringVar(&o.Cert, "etcd-cert", "", "client certificate file for etcd (TLS)")
	fs.StringVar(&o.CertKey, "etcd-key", "", "client key file for etcd (TLS)")
}

// layout is the key layout under the prefix.
func (o etcdOptions) layout() etcd.Layout { return etcd.Layout{Prefix: o.Prefix} }

// client returns a client of the endpoints. It does not wait for a
// connection: requests fail (and the reflectors retry) while the cluster
// is unreachable.
func (o etcdOptions) client() (*clientv3.Client, error) {
	if len(o.Endpoints) == 0 {
		return nil, errors.New("--etcd-endpoints: give the etcd cluster's endpoints (HOST:PORT,...)")
	}
	var tlsConfig *tls.Config
	if o.CACert != "" || o.Cert != "" || o.CertKey != "" {
		if (o.Cert == "") != (o.CertKey == "") {
			return nil, errors.New("--etcd-cert and --etcd-key: give both or neither")
		}
		info := transport.TLSInfo{CertFile: o.Cert, KeyFile: o.CertKey, TrustedCAFile: o.CACert}
		var err error
		if tlsConfig, err = info.ClientConfig(); err != nil {
			return nil, fmt.Errorf("etcd TLS: %w", err)
		}
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints: o.Endpoints, TLS: tlsConfig, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		// Notice a dead or paused member within a few seconds and go to
		// another.
		DialKeepAliveTime: 2 * time.Second, DialKeepAliveTimeout: 2 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client for %s: %w", strings.Join(o.Endpoints, ","), err)
	}
	return c, nil
}

// fleetName is the etcd name of an object whose primary key reads key
// (a name may not hold '/', which route and rule keys have).
func fleetName(key string) string { return url.PathEscape(key) }

// The primary keys of the three kinds as text.
func sysctlKey(s *sysctl.Sysctl) string { return s.Name }
func routeKey(r *routes.Route) string   { return r.Key().String() }
func ruleKey(r *iptables.Rule) string   { return r.Key() }

// encodeObject is an object's value in etcd: its JSON without status.
func encodeObject(obj any) ([]byte, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, err
	}
	delete(fields, "status")
	return json.Marshal(fields) // keys sorted: equal objects, equal values
}

// decodeObject is the reflector's transform of one kind: the value
// decoded strictly (an unknown field is an error), validated like a file's
// entry, and stored under its own name.
func decodeObject[T any, PT interface {
	*T
	Validate() error
}](key func(PT) string) func(name string, v []byte) (PT, error) {
	return func(name string, v []byte) (PT, error) {
		obj := PT(new(T))
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.DisallowUnknownFields()
		if err := dec.Decode(obj); err != nil {
			return nil, fmt.Errorf("decoding: %w", err)
		}
		if err := obj.Validate(); err != nil {
			return nil, err
		}
		if want := fleetName(key(obj)); want != name {
			return nil, fmt.Errorf("stored under the name %q, but the object's name is %q", name, want)
		}
		return obj, nil
	}
}

// desiredObjects turns a validated desired file into each table's objects
// by name, as `fleet apply` writes them.
func desiredObjects(f *desiredFile) (map[string]map[string][]byte, error) {
	out := map[string]map[string][]byte{}
	var errs []error
	add := func(table, key string, obj any) {
		if out[table] == nil {
			out[table] = map[string][]byte{}
		}
		v, err := encodeObject(obj)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", table, key, err))
			return
		}
		out[table][fleetName(key)] = v
	}
	for _, t := range fleetTables {
		out[t] = map[string][]byte{}
	}
	for _, s := range f.Sysctls {
		add(sysctl.TableName, sysctlKey(s), s)
	}
	for _, r := range f.Routes {
		add(routes.TableName, routeKey(r), r)
	}
	for _, r := range f.Rules {
		add(iptables.TableName, ruleKey(r), r)
	}
	return out, errors.Join(errs...)
}

// fleetSource is an etcd.Source made at start: the reflector is built
// when the hive is populated (`agent run cells` makes no client), and the
// first List waits until the client is up and the node claimed, so that
// no desired object reaches a table of an agent that then refuses to run.
type fleetSource struct {
	f   *fleetAgent
	src *etcd.Source
}

// List implements reflector.Source.
func (s *fleetSource) List(ctx context.Context) ([]reflector.Item[[]byte], uint64, error) {
	select {
	case <-s.f.started:
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	return s.src.List(ctx)
}

// Watch implements reflector.Source (called after a List).
func (s *fleetSource) Watch(ctx context.Context, after uint64) (<-chan reflector.Event[[]byte], error) {
	return s.src.Watch(ctx, after)
}

// fleetAgent is fleet mode's part of the agent: the client, the source
// and reflector of the three tables, the status publisher and reporter.
// With a desired file it does nothing.
type fleetAgent struct {
	cfg     AgentConfig
	log     *slog.Logger
	health  cell.Health
	started chan struct{} // closed once the client is up and the node claimed

	client  *clientv3.Client
	pub     *etcd.Publisher
	source  *fleetSource
	desired *reflector.Multi[[]byte]

	mu        sync.Mutex
	published etcd.NodeStatus // the last status given to the publisher
}

type fleetParams struct {
	cell.In

	Reflect   reflectorcell.Params
	Config    AgentConfig
	Lifecycle cell.Lifecycle
	Health    cell.Health
	Log       *slog.Logger
	FirstLoad *firstLoad

	Sysctls statedb.RWTable[*sysctl.Sysctl]
	Routes  statedb.RWTable[*routes.Route]
	Rules   statedb.RWTable[*iptables.Rule]

	SysctlRec reconciler.Reconciler[*sysctl.Sysctl]
	RouteRec  reconciler.Reconciler[*routes.Route]
	RuleRec   reconciler.Reconciler[*iptables.Rule]
}

// newFleet builds fleet mode when --etcd-endpoints is given: one
// reflector of the three tables (it registers each table's initializer, so
// nothing is pruned before the first complete list), a start hook that
// makes the client and claims the node name (a second live agent of the
// same name fails here, before anything is applied), a stop hook that
// revokes the lease (the node leaves the fleet view at once), and the
// status reporter's job.
func newFleet(p fleetParams) (*fleetAgent, error) {
	f := &fleetAgent{cfg: p.Config, log: p.Log, started: make(chan struct{})}
	if !p.Config.fleetMode() {
		return f, nil
	}
	f.health = p.Health.NewScope("etcd")
	opts := p.Config.etcdOptions()
	// Before the reflector's job: the client is up before it starts, and
	// closed only after it stopped (hooks stop in reverse order).
	p.Lifecycle.Append(cell.Hook{
		OnStart: func(ctx context.Context) error { return f.start(ctx, opts) },
		OnStop:  f.stop,
	})
	f.source = &fleetSource{f: f}
	var err error
	f.desired, err = reflectorcell.RegisterMulti(p.Reflect, reflector.MultiConfig[[]byte]{
		Name:   "fleet",
		Source: f.source,
		Tables: []reflector.TableSpec[[]byte]{
			reflector.Into[[]byte, *sysctl.Sysctl]{
				Table:     sysctl.TableName,
				Writer:    reconciler.DesiredWriter[*sysctl.Sysctl]{Table: p.Sysctls, Equal: (*sysctl.Sysctl).Equal, SetObjectStatus: (*sysctl.Sysctl).SetStatus},
				Transform: decodeObject[sysctl.Sysctl](sysctlKey),
			},
			reflector.Into[[]byte, *routes.Route]{
				Table:     routes.TableName,
				Writer:    reconciler.DesiredWriter[*routes.Route]{Table: p.Routes, Equal: (*routes.Route).Equal, SetObjectStatus: (*routes.Route).SetStatus},
				Transform: decodeObject[routes.Route](routeKey),
			},
			reflector.Into[[]byte, *iptables.Rule]{
				Table:     iptables.TableName,
				Writer:    reconciler.DesiredWriter[*iptables.Rule]{Table: p.Rules, Equal: (*iptables.Rule).Equal, SetObjectStatus: (*iptables.Rule).SetStatus},
				Transform: decodeObject[iptables.Rule](ruleKey),
			},
		},
	})
	if err != nil {
		return nil, err
	}
	rep := &statusReporter{f: f, db: p.Reflect.DB, first: p.FirstLoad, tables: []reportedTable{
		reportTable(p.Sysctls, p.SysctlRec, (*sysctl.Sysctl).GetStatus, sysctlKey),
		reportTable(p.Routes, p.RouteRec, (*routes.Route).GetStatus, routeKey),
		reportTable(p.Rules, p.RuleRec, (*iptables.Rule).GetStatus, ruleKey),
	}}
	return f, p.Reflect.Jobs.Add(job.OneShot("report-status", rep.run))
}

// etcdOptions are the run flags' etcd part.
func (c AgentConfig) etcdOptions() etcdOptions {
	return etcdOptions{Endpoints: c.EtcdEndpoints, Prefix: c.EtcdPrefix, CACert: c.EtcdCACert, Cert: c.EtcdCert, CertKey: c.EtcdKey}
}

// start makes the client, checks the layout version under the prefix (an
// unknown one is refused before anything is read), makes the sources and
// claims the node's status key.
func (f *fleetAgent) start(ctx context.Context, opts etcdOptions) error {
	c, err := opts.client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := etcd.CheckLayout(ctx, c, opts.layout()); err != nil {
		c.Close()
		return fmt.Errorf("joining the fleet at %s: %w", strings.Join(opts.Endpoints, ","), err)
	}
	if f.source.src, err = etcd.NewTablesSource(c, opts.layout(), fleetTables, f.cfg.Node); err != nil {
		c.Close()
		return err
	}
	pub, err := etcd.StartPublisher(ctx, etcd.PublisherConfig{
		Client: c, Layout: opts.layout(), Node: f.cfg.Node, TTL: f.cfg.StatusTTL, Logger: f.log,
		ObjectStatuses: f.cfg.ObjectStatus,
	}, etcd.NodeStatus{})
	if err != nil {
		c.Close()
		if errors.Is(err, etcd.ErrNodeTaken) {
			return fmt.Errorf("--node %s: %w: another agent with this node name is running (pick another --node, or stop it; a killed agent's name is free again after --status-ttl %v)", f.cfg.Node, err, f.cfg.StatusTTL)
		}
		return fmt.Errorf("joining the fleet at %s as node %s: %w", strings.Join(opts.Endpoints, ","), f.cfg.Node, err)
	}
	f.client, f.pub = c, pub
	f.log.Info("Fleet mode: desired state from etcd", "endpoints", strings.Join(opts.Endpoints, ","), "prefix", opts.layout().Prefix, "node", f.cfg.Node)
	f.health.OK("joined as node " + f.cfg.Node)
	close(f.started)
	return nil
}

// stop revokes the lease (the node's status goes at once) and closes the
// client.
func (f *fleetAgent) stop(ctx context.Context) error {
	if f.client == nil {
		return nil
	}
	err := f.pub.Stop(ctx)
	return errors.Join(err, f.client.Close())
}

// publish gives the publisher st (it writes it when it changed, within
// its rate limit).
func (f *fleetAgent) publish(st etcd.NodeStatus) {
	f.mu.Lock()
	f.published = st
	f.mu.Unlock()
	f.pub.Publish(st)
}

// Status returns the last status published ("" node outside fleet mode).
func (f *fleetAgent) Status() etcd.NodeStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.published
}

// reportedTable is what the reporter reads of one table.
type reportedTable struct {
	revision func(statedb.ReadTxn) (statedb.Revision, <-chan struct{})
	wait     func(ctx context.Context, rev statedb.Revision) error
	count    func(txn statedb.ReadTxn, st *etcd.NodeStatus)
	name     string
	objects  func(txn statedb.ReadTxn) map[string]etcd.ObjectStatus
}

func reportTable[Obj any](t statedb.Table[Obj], rec reconciler.Reconciler[Obj], getStatus func(Obj) reconciler.Status, key func(Obj) string) reportedTable {
	return reportedTable{
		name: t.Name(),
		objects: func(txn statedb.ReadTxn) map[string]etcd.ObjectStatus {
			out := map[string]etcd.ObjectStatus{}
			for obj := range t.All(txn) {
				s := getStatus(obj)
				out[fleetName(key(obj))] = etcd.ObjectStatus{Kind: s.Kind.String(), Error: s.Error}
			}
			return out
		},
		revision: func(txn statedb.ReadTxn) (statedb.Revision, <-chan struct{}) {
			_, watch := t.AllWatch(txn)
			return t.Revision(txn), watch
		},
		wait: func(ctx context.Context, rev statedb.Revision) error {
			// Failing objects were attempted too: their errors are reported.
			rec.WaitUntilReconciled(ctx, rev)
			return ctx.Err()
		},
		count: func(txn statedb.ReadTxn, st *etcd.NodeStatus) {
			for kind, n := range reconciler.CountByStatus(txn, t, getStatus) {
				st.Objects[kind.String()] += n
			}
			for obj := range t.All(txn) {
				if s := getStatus(obj); s.Kind == reconciler.StatusKindError && len(st.Errors) < maxReportedErrors {
					st.Errors = append(st.Errors, fmt.Sprintf("%s %s: %s", t.Name(), key(obj), s.Error))
				}
			}
		},
	}
}

// maxReportedErrors is how many failing objects a node's status names.
const maxReportedErrors = 5

// reportSettle is how long the reporter lets a burst of changes settle
// before it reads them.
const reportSettle = 10 * time.Millisecond

// statusReporter publishes the node's status: the revision reached (every
// change of the desired state up to it is in the tables and was attempted),
// the objects by status and the latest errors, whenever the tables
// changed and the reconcilers caught up with them, or the revision moved.
type statusReporter struct {
	f      *fleetAgent
	db     *statedb.DB
	first  *firstLoad
	tables []reportedTable
}

// run is the reporter's job. The revision reached is the reflector's: one
// number for the three tables, which move together. It moves only with
// changes of this node's desired state (see etcd.Source), so every move is
// published: a node that reached its desired revision says so at once.
func (r *statusReporter) run(ctx context.Context, health cell.Health) error {
	select {
	case <-r.f.started:
	case <-ctx.Done():
		return nil
	}
	var lastRevs []statedb.Revision
	var lastRejected []string
	lastReached := uint64(0)
	ws := statedb.NewWatchSet()
	for {
		reached, moved := r.f.desired.RevisionWatch()
		if reached > 0 {
			r.first.close() // every table listed once: /readyz
		}
		txn := r.db.ReadTxn()
		revs := make([]statedb.Revision, len(r.tables))
		ws.Clear()
		ws.Add(moved)
		for i, t := range r.tables {
			var watch <-chan struct{}
			revs[i], watch = t.revision(txn)
			ws.Add(watch)
		}
		rejected := r.rejected()
		if reached > 0 && (reached != lastReached || !slices.Equal(revs, lastRevs) || !slices.Equal(rejected, lastRejected)) {
			if err := r.waitReconciled(ctx, revs); err != nil {
				return nil // ctx ended
			}
			st := etcd.NodeStatus{Node: r.f.cfg.Node, Revision: int64(reached), Objects: map[string]int{}}
			txn := r.db.ReadTxn()
			// Objects whose value the node refused count as not
			// applied: the table still holds their last good version.
			if len(rejected) > 0 {
				st.Objects[etcd.Rejected] = len(rejected)
				st.Errors = append(st.Errors, rejected[:min(len(rejected), maxReportedErrors)]...)
			}
			for _, t := range r.tables {
				t.count(txn, &st)
				if r.f.cfg.ObjectStatus {
					r.f.pub.PublishObjects(t.name, t.objects(txn))
				}
			}
			r.f.publish(st)
			lastReached, lastRevs, lastRejected = reached, revs, rejected
			health.OK(fmt.Sprintf("revision %d reported", reached))
		}
		// The reflector's commit wakes the tables' watchers just before its
		// revision moves: settle, so that one change makes one status.
		if _, err := ws.Wait(ctx, reportSettle); err != nil {
			return nil // ctx ended
		}
	}
}

// rejected returns what the reflector refused, as "TABLE KEY: rejected: ERROR".
func (r *statusReporter) rejected() []string {
	var out []string
	for _, rej := range r.f.desired.Rejected() {
		name := rej.Key
		if key, err := url.PathUnescape(name); err == nil {
			name = key
		}
		out = append(out, fmt.Sprintf("%s %s: rejected: %s", rej.Table, name, rej.Error))
	}
	return out
}

// waitReconciled waits until each reconciler processed its table up to
// revs (every object in them was attempted); an error only when ctx ends.
func (r *statusReporter) waitReconciled(ctx context.Context, revs []statedb.Revision) error {
	for i, t := range r.tables {
		if err := t.wait(ctx, revs[i]); err != nil {
			return err
		}
	}
	return nil
}

// defaultNode is --node's default: the host's name.
func defaultNode() string {
	h, _ := os.Hostname()
	return cmp.Or(strings.TrimSpace(h), "localhost")
}
