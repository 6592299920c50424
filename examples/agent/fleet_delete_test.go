package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/steadystate/steadystate/etcd"
	"github.com/steadystate/steadystate/etcd/etcdtest"
	"github.com/steadystate/steadystate/examples/iptables"
	"github.com/steadystate/steadystate/examples/routes"
	"github.com/steadystate/steadystate/examples/sysctl"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
)

// nopHealth is a cell.Health that keeps nothing.
type nopHealth struct{}

func (nopHealth) OK(string)                   {}
func (nopHealth) Degraded(string, error)      {}
func (nopHealth) Stopped(string)              {}
func (nopHealth) NewScope(string) cell.Health { return nopHealth{} }
func (nopHealth) Close()                      {}

// reconcileWith runs a reconciler of table on target, retrying quickly.
func reconcileWith[Obj any](t *testing.T, n *fleetTablesNode, name string, cfg reconciler.Config[Obj]) *reconcilertest.Reconciler[Obj] {
	cfg.Name = name
	cfg.RetryBackoffMin, cfg.RetryBackoffMax = 10*time.Millisecond, 50*time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return reconcilertest.Start(t, n.db, cfg)
}

// The agent's status reporter, on the node's real tables and reflector
// and reconcilers whose targets are recorders: a route removed from the
// desired state whose delete from the real system fails (and is retried)
// is still in the real system, so the node has not applied the desired
// state: its status must not say so, nor `fleet status` count it, until
// the delete succeeds.
func TestFleetStatusFailingDelete(t *testing.T) {
	cl := etcdtest.StartCluster(t, etcdtest.Binary(t), 1)
	f := &fleetFixture{t: t, c: cl.Client(), eps: strings.Join(cl.Endpoints(), ","), l: etcd.Layout{Prefix: "/faildelete"}}
	ctx := t.Context()
	data, err := os.ReadFile("desired.yaml")
	if err != nil {
		t.Fatal(err)
	}
	file, err := decodeDesired("desired.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	good, err := desiredObjects(file)
	if err != nil {
		t.Fatal(err)
	}
	if f.rev, err = etcd.ApplyTables(ctx, f.c, f.l, etcd.ScopeAll, good); err != nil {
		t.Fatal(err)
	}
	n := startFleetTables(t, f.c, f.l, "n1")
	sysT := reconcilertest.NewTarget(sysctlKey)
	routeT := reconcilertest.NewTarget(routeKey)
	ruleT := reconcilertest.NewTarget(ruleKey)
	sysR := reconcileWith(t, n, "sysctls", reconciler.Config[*sysctl.Sysctl]{Table: n.sysctls, Target: sysT,
		GetObjectStatus: (*sysctl.Sysctl).GetStatus, SetObjectStatus: (*sysctl.Sysctl).SetStatus, CloneObject: (*sysctl.Sysctl).Clone})
	routeR := reconcileWith(t, n, "routes", reconciler.Config[*routes.Route]{Table: n.routes, Target: routeT,
		GetObjectStatus: (*routes.Route).GetStatus, SetObjectStatus: (*routes.Route).SetStatus, CloneObject: (*routes.Route).Clone})
	ruleR := reconcileWith(t, n, "rules", reconciler.Config[*iptables.Rule]{Table: n.rules, Target: ruleT,
		GetObjectStatus: (*iptables.Rule).GetStatus, SetObjectStatus: (*iptables.Rule).SetStatus, CloneObject: (*iptables.Rule).Clone})

	pub, err := etcd.StartPublisher(ctx, etcd.PublisherConfig{Client: f.c, Layout: f.l, Node: "n1", MinInterval: time.Millisecond}, etcd.NodeStatus{})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Stop(context.Background())
	started := make(chan struct{})
	close(started)
	agent := &fleetAgent{cfg: AgentConfig{Node: "n1"}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), started: started,
		client: f.c, pub: pub, desired: n.multi}
	rep := &statusReporter{f: agent, db: n.db, first: newFirstLoad(), tables: []reportedTable{
		reportTable(n.sysctls, sysR, (*sysctl.Sysctl).GetStatus, sysctlKey),
		reportTable(n.routes, routeR, (*routes.Route).GetStatus, routeKey),
		reportTable(n.rules, ruleR, (*iptables.Rule).GetStatus, ruleKey),
	}}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); rep.run(runCtx, nopHealth{}) }()
	defer func() { cancel(); <-done }()

	applied := func(rev int64, want bool) fleetReport {
		t.Helper()
		var r fleetReport
		waitFor(t, fmt.Sprintf("applied=%v at revision %d", want, rev), func() error {
			var err error
			if r, err = readFleet(ctx, f.c, f.l, false); err != nil {
				return err
			}
			if len(r.Nodes) != 1 || r.Revision != rev || !r.Nodes[0].Received || r.Nodes[0].Applied != want {
				return fmt.Errorf("%s: %+v", r.Summary, r.Nodes)
			}
			return nil
		})
		return r
	}
	applied(f.rev, true)
	inReal := len(routeT.State())
	if inReal != len(good[routes.TableName]) {
		t.Fatalf("the route target holds %d routes, want %d", inReal, len(good[routes.TableName]))
	}

	// A route goes from the desired state; its delete fails, and keeps
	// failing.
	var gone string
	for key := range routeT.State() {
		gone = key
		break
	}
	routeT.Inject(gone, reconcilertest.Fault{})
	next := maps.Clone(good)
	next[routes.TableName] = maps.Clone(good[routes.TableName])
	delete(next[routes.TableName], fleetName(gone))
	rev, err := etcd.ApplyTables(ctx, f.c, f.l, etcd.ScopeAll, next)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the delete of "+gone+" attempted", func() error {
		if routeT.Count("delete", gone) < 2 {
			return fmt.Errorf("%d deletes of %s", routeT.Count("delete", gone), gone)
		}
		return nil
	})
	if _, still := routeT.State()[gone]; !still {
		t.Fatalf("%s is gone from the target though its delete fails", gone)
	}
	r, err := readFleet(ctx, f.c, f.l, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Nodes) == 1 && r.Nodes[0].Revision >= rev && r.Nodes[0].Applied {
		t.Errorf("n1 reports the desired state of revision %d applied (%s; objects %v, errors %v) while the route %s it removed is still in the real system: its delete fails",
			rev, r.Summary, r.Nodes[0].Objects, r.Nodes[0].Errors, gone)
	}
	routeT.Clear(gone)
	waitFor(t, "the delete of "+gone+" retried", func() error {
		if _, still := routeT.State()[gone]; still {
			return fmt.Errorf("%s still in the target", gone)
		}
		return nil
	})
	applied(rev, true)
}
