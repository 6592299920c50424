package fleetcell

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/steadystate/steadystate/etcd"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/job"
	"github.com/steadystate/steadystate/reflector"
	"github.com/steadystate/steadystate/reflector/reflectorcell"
)

// Cell is fleet mode's node side: add it only in fleet mode (cell.When
// with Config.Enabled), with ConfigCell and the program's tables
// (TableOut). It provides *Node.
var Cell = cell.Module("fleet", "Fleet mode: desired state from etcd, the node's status to etcd",
	cell.Provide(newNode),
	cell.Invoke(startNode),
)

// startNode makes the hive build the node (and so add its hooks and jobs).
func startNode(*Node) {}

// Node is a program's node of the fleet: the client, the source and
// reflector of its tables, the status publisher and reporter.
type Node struct {
	cfg     Config
	log     *slog.Logger
	health  cell.Health
	tables  []Table
	started chan struct{} // closed once the client is up and the node claimed
	listed  chan struct{} // closed once every table was listed
	once    sync.Once

	client  *clientv3.Client
	pub     *etcd.Publisher
	source  *startedSource
	desired *reflector.Multi[[]byte]

	mu        sync.Mutex
	published etcd.NodeStatus // the last status given to the publisher
}

// Params are what the cell takes from the hive.
type Params struct {
	cell.In

	Reflect   reflectorcell.Params
	Config    Config
	Lifecycle cell.Lifecycle
	Health    cell.Health
	Log       *slog.Logger
	Tables    []Table `group:"fleet-tables"`
}

// newNode builds the node: one reflector of every table (it registers
// each table's initializer, so nothing is pruned before the first
// complete list), a start hook that makes the client, checks the layout
// version and claims the node name (a second live node of the same name
// fails here, before anything is applied), a stop hook that leaves the
// fleet (status and record deleted, lease revoked), and the status
// reporter's job.
func newNode(p Params) (*Node, error) {
	if len(p.Tables) == 0 {
		return nil, errNoTables
	}
	n := &Node{cfg: p.Config, log: p.Log, tables: p.Tables, health: p.Health.NewScope("etcd"),
		started: make(chan struct{}), listed: make(chan struct{})}
	var specs []reflector.TableSpec[[]byte]
	var errs []error
	for _, t := range p.Tables {
		if k, ok := t.(interface{ check() error }); ok {
			errs = append(errs, k.check())
		}
		specs = append(specs, t.spec())
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// Before the reflector's job: the client is up before it starts, and
	// closed only after it stopped (hooks stop in reverse order).
	p.Lifecycle.Append(cell.Hook{OnStart: n.start, OnStop: n.stop})
	n.source = &startedSource{started: n.started}
	var err error
	n.desired, err = reflectorcell.RegisterMulti(p.Reflect, reflector.MultiConfig[[]byte]{Name: "fleet", Source: n.source, Tables: specs})
	if err != nil {
		return nil, err
	}
	rep := &reporter{n: n, db: p.Reflect.DB}
	for _, t := range p.Tables {
		rep.tables = append(rep.tables, t.report())
	}
	return n, p.Reflect.Jobs.Add(job.OneShot("report-status", rep.run))
}

// tableNames are the tables' names in etcd.
func (n *Node) tableNames() []string {
	var names []string
	for _, t := range n.tables {
		names = append(names, t.tableName())
	}
	return names
}

// start makes the client, checks the layout version under the prefix (an
// unknown one is refused before anything is read), makes the source and
// claims the node's status key.
func (n *Node) start(ctx context.Context) error {
	opts := n.cfg.ClientOptions()
	c, err := opts.Client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	eps := strings.Join(opts.Endpoints, ",")
	if err := etcd.CheckLayout(ctx, c, opts.Layout()); err != nil {
		c.Close()
		return fmt.Errorf("joining the fleet at %s: %w", eps, err)
	}
	if n.source.src, err = etcd.NewTablesSource(c, opts.Layout(), n.tableNames(), n.cfg.Node); err != nil {
		c.Close()
		return err
	}
	pub, err := etcd.StartPublisher(ctx, etcd.PublisherConfig{
		Client: c, Layout: opts.Layout(), Node: n.cfg.Node, TTL: n.cfg.StatusTTL, Logger: n.log,
		ObjectStatuses: n.cfg.ObjectStatus,
	}, etcd.NodeStatus{})
	if err != nil {
		c.Close()
		if errors.Is(err, etcd.ErrNodeTaken) {
			return fmt.Errorf("--node %s: %w: another node with this name is running (pick another --node, or stop it; a killed node's name is free again after --status-ttl %v)", n.cfg.Node, err, n.cfg.StatusTTL)
		}
		return fmt.Errorf("joining the fleet at %s as node %s: %w", eps, n.cfg.Node, err)
	}
	n.client, n.pub = c, pub
	n.log.Info("Fleet mode: desired state from etcd", "endpoints", eps, "prefix", opts.Layout().Prefix, "node", n.cfg.Node)
	n.health.OK("joined as node " + n.cfg.Node)
	close(n.started)
	return nil
}

// stop leaves the fleet (the node's status goes at once) and closes the
// client.
func (n *Node) stop(ctx context.Context) error {
	if n.client == nil {
		return nil
	}
	err := n.pub.Stop(ctx)
	return errors.Join(err, n.client.Close())
}

// publish gives the publisher st (it writes it when it changed, within
// its rate limit).
func (n *Node) publish(st etcd.NodeStatus) {
	n.mu.Lock()
	n.published = st
	n.mu.Unlock()
	n.pub.Publish(st)
}

// Status returns the last status published (zero before the first).
func (n *Node) Status() etcd.NodeStatus {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.published
}

// Name is the node's name in the fleet.
func (n *Node) Name() string { return n.cfg.Node }

// Revision is the etcd revision of the desired state the node's tables
// hold (0 before the first list; see reflector.Multi.Revision).
func (n *Node) Revision() uint64 { return n.desired.Revision() }

// Listed returns a channel that closes once every table was listed from
// etcd (the tables are initialized) and the first status published.
func (n *Node) Listed() <-chan struct{} { return n.listed }

// startedSource is an etcd.Source made at start: the reflector is built
// when the hive is populated (a `cells` printout makes no client), and
// the first List waits until the client is up and the node claimed, so
// that no desired object reaches a table of a node that then refuses to
// run.
type startedSource struct {
	started <-chan struct{}
	src     *etcd.Source
}

// List implements reflector.Source.
func (s *startedSource) List(ctx context.Context) ([]reflector.Item[[]byte], uint64, error) {
	select {
	case <-s.started:
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	return s.src.List(ctx)
}

// Watch implements reflector.Source (called after a List).
func (s *startedSource) Watch(ctx context.Context, after uint64) (<-chan reflector.Event[[]byte], error) {
	return s.src.Watch(ctx, after)
}
