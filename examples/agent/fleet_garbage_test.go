package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/steadystate/steadystate/etcd"
	"github.com/steadystate/steadystate/etcd/etcdtest"
	"github.com/steadystate/steadystate/etcd/fleetcmd"
	"github.com/steadystate/steadystate/examples/iptables"
	"github.com/steadystate/steadystate/examples/routes"
	"github.com/steadystate/steadystate/examples/sysctl"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
	"github.com/steadystate/steadystate/reflector"
	"github.com/steadystate/steadystate/statedb"
)

// fleetTablesNode is an agent's three tables filled from etcd the way
// fleet mode fills them (one Multi, the agent's transforms), without the
// reconcilers: what reaches the tables, nothing else.
type fleetTablesNode struct {
	db      *statedb.DB
	sysctls statedb.RWTable[*sysctl.Sysctl]
	routes  statedb.RWTable[*routes.Route]
	rules   statedb.RWTable[*iptables.Rule]
	multi   *reflector.Multi[[]byte]
	health  *reconcilertest.Health
}

func startFleetTables(t *testing.T, c *clientv3.Client, l etcd.Layout, node string) *fleetTablesNode {
	t.Helper()
	n := &fleetTablesNode{db: statedb.New(), health: &reconcilertest.Health{}}
	var err error
	if n.sysctls, err = sysctl.NewTable(n.db); err != nil {
		t.Fatal(err)
	}
	if n.routes, err = routes.NewTable(n.db); err != nil {
		t.Fatal(err)
	}
	if n.rules, err = iptables.NewTable(n.db); err != nil {
		t.Fatal(err)
	}
	src, err := etcd.NewTablesSource(c, l, fleetTables, node)
	if err != nil {
		t.Fatal(err)
	}
	n.multi, err = reflector.NewMulti(n.db, reflector.MultiConfig[[]byte]{
		Name: "fleet", Source: src,
		Tables: []reflector.TableSpec[[]byte]{
			reflector.Into[[]byte, *sysctl.Sysctl]{
				Table:     sysctl.TableName,
				Writer:    reconciler.DesiredWriter[*sysctl.Sysctl]{Table: n.sysctls, Equal: (*sysctl.Sysctl).Equal, SetObjectStatus: (*sysctl.Sysctl).SetStatus},
				Transform: decodeObject[sysctl.Sysctl](sysctlKey),
			},
			reflector.Into[[]byte, *routes.Route]{
				Table:     routes.TableName,
				Writer:    reconciler.DesiredWriter[*routes.Route]{Table: n.routes, Equal: (*routes.Route).Equal, SetObjectStatus: (*routes.Route).SetStatus},
				Transform: decodeObject[routes.Route](routeKey),
			},
			reflector.Into[[]byte, *iptables.Rule]{
				Table:     iptables.TableName,
				Writer:    reconciler.DesiredWriter[*iptables.Rule]{Table: n.rules, Equal: (*iptables.Rule).Equal, SetObjectStatus: (*iptables.Rule).SetStatus},
				Transform: decodeObject[iptables.Rule](ruleKey),
			},
		},
		RetryBackoffMin: 10 * time.Millisecond, RetryBackoffMax: 100 * time.Millisecond,
		Health: n.health, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.multi.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return n
}

// contents returns every table as table → etcd name → value (as fleet
// apply encodes it), and an error for any object that is not valid or
// not stored under its own name.
func (n *fleetTablesNode) contents() (map[string]map[string]string, error) {
	txn := n.db.ReadTxn()
	out := map[string]map[string]string{}
	var bad []string
	add := func(table, key string, obj any, valid error) {
		if out[table] == nil {
			out[table] = map[string]string{}
		}
		v, err := encodeObject(obj)
		if err != nil || valid != nil {
			bad = append(bad, fmt.Sprintf("%s %s: %v %v", table, key, err, valid))
		}
		out[table][fleetName(key)] = string(v)
	}
	for _, t := range fleetTables {
		out[t] = map[string]string{}
	}
	for s := range n.sysctls.All(txn) {
		add(sysctl.TableName, sysctlKey(s), s, s.Validate())
	}
	for r := range n.routes.All(txn) {
		add(routes.TableName, routeKey(r), r, r.Validate())
	}
	for r := range n.rules.All(txn) {
		add(iptables.TableName, ruleKey(r), r, r.Validate())
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("malformed objects in the tables: %s", strings.Join(bad, "; "))
	}
	return out, nil
}

// rejected returns the reflector's rejections as "TABLE KEY".
func (n *fleetTablesNode) rejected() []string {
	var out []string
	for _, r := range n.multi.Rejected() {
		out = append(out, r.Table+" "+r.Key)
	}
	slices.Sort(out)
	return out
}

// status is the node's status as the agent's reporter computes it, all
// objects Done (no reconciler runs here).
func (n *fleetTablesNode) status() etcd.NodeStatus {
	got, _ := n.contents()
	objs := 0
	for _, byName := range got {
		objs += len(byName)
	}
	st := etcd.NodeStatus{Revision: int64(n.multi.Revision()), Objects: map[string]int{etcd.Done: objs}}
	if rej := n.rejected(); len(rej) > 0 {
		st.Objects[etcd.Rejected] = len(rej)
	}
	return st
}

func stringsOf(tables map[string]map[string][]byte) map[string]map[string]string {
	out := map[string]map[string]string{}
	for t, byName := range tables {
		out[t] = map[string]string{}
		for k, v := range byName {
			out[t][k] = string(v)
		}
	}
	return out
}

// Garbage anywhere under the prefix, written past `fleet apply` (another
// tool, a hand with etcdctl): values that do not decode, names that are
// not the object's, a name with '/', an empty name, an unknown field, keys
// outside the layout, a generation not in force, a table no agent knows,
// a current key that names no generation; and malformed status, record and
// object status keys. Nothing malformed reaches a table: the node keeps
// the last good version of every object, names each rejected key, is not
// counted as applied, and `fleet status` names the garbage and fails on
// none of it; a current key that names no generation leaves the node's
// tables as they were and its revision behind, and once repaired the node
// converges.
func TestFleetGarbageNeverReachesATable(t *testing.T) {
	cl := etcdtest.StartCluster(t, etcdtest.Binary(t), 1)
	f := &fleetFixture{t: t, c: cl.Client(), eps: strings.Join(cl.Endpoints(), ","), l: etcd.Layout{Prefix: "/garbage"}}
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
	settled := func(what string, rev int64, rejected []string) {
		t.Helper()
		waitFor(t, what, func() error {
			if got := n.multi.Revision(); got < uint64(rev) {
				return fmt.Errorf("revision %d, want %d", got, rev)
			}
			if got := n.rejected(); !slices.Equal(got, rejected) {
				return fmt.Errorf("rejected %q, want %q", got, rejected)
			}
			return nil
		})
		got, err := n.contents()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if want := stringsOf(good); !maps.EqualFunc(got, want, maps.Equal) {
			t.Fatalf("%s: the tables hold %v\nwant the last good state %v", what, got, want)
		}
	}
	settled("the good state", f.rev, nil)

	gen := func(table string) string {
		resp, err := f.c.Get(ctx, f.l.Current(table, etcd.ScopeAll))
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("the generation in force of %s: %v", table, err)
		}
		return f.l.Generation(table, etcd.ScopeAll, string(resp.Kvs[0].Value))
	}
	routeGen, sysctlGen := gen(routes.TableName), gen(sysctl.TableName)
	existing := slices.Sorted(maps.Keys(good[routes.TableName]))[0]
	put := func(k, v string) int64 {
		t.Helper()
		resp, err := f.c.Put(ctx, k, v)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	// Into the generations in force: each is an event the node gets.
	put(routeGen+"odd name", `{"prefix":"10.9.0.0/16","type":"blackhole"}`)
	put(routeGen, `{"prefix":"10.8.0.0/16","type":"blackhole"}`) // the empty name
	put(routeGen+"a/b", `{"prefix":"10.7.0.0/16","type":"blackhole"}`)
	put(routeGen+existing, "\x00\xffnot json")
	put(sysctlGen+"net.ipv4.ip_forward", `{"name":"net.ipv4.ip_forward","value":"1","extra":1}`)
	// Outside the generations in force: nothing the node reads.
	put(f.l.Scope(routes.TableName, etcd.ScopeAll)+"junk", "junk")
	put(f.l.Generation(routes.TableName, etcd.ScopeAll, "g999999999999")+"x", "junk")
	put(f.l.Current("nosuchtable", etcd.ScopeAll), "g000000000001")
	put(f.l.Generation(routes.TableName, etcd.NodeScope("n1"), "g000000000001")+"y", "junk") // no current: not in force
	put(f.l.Desired()+"stray", "junk")
	rejected := []string{"routes ", "routes a/b", "routes " + existing, "routes odd name", "sysctls net.ipv4.ip_forward"}
	slices.Sort(rejected)
	settled("garbage in the generations in force", f.rev, rejected)
	if desired, err := etcd.DesiredRevision(ctx, f.c, f.l, fleetTables, "n1"); err != nil || desired != f.rev {
		t.Fatalf("DesiredRevision %d, %v; want %d (garbage written past Apply does not move it)", desired, err, f.rev)
	}

	// The node's status and the fleet's view of it, with garbage under
	// the status, record and object status prefixes.
	pub := f.node("n1", n.status())
	for k, v := range map[string]string{
		f.l.Status("n2"):                        "garbage{",
		f.l.StatusPrefix() + "x/y":              `{"node":"x"}`,
		f.l.Record("n3"):                        "\x01\x02",
		f.l.RecordPrefix() + "z/w":              "{}",
		f.l.ObjectStatus("n1", "routes", "a"):   "not json",
		f.l.ObjectStatusPrefix("n1") + "routes": `{"kind":"Done"}`,
	} {
		put(k, v)
	}
	code, out, errOut := f.run("status", "--objects", "--wait", "--timeout", "10s")
	if code != fleetcmd.WaitFailed || !strings.Contains(errOut, "Rejected=5") {
		t.Fatalf("fleet status --wait of a node with 5 rejected objects: exit %d, want %d\n%s%s", code, fleetcmd.WaitFailed, out, errOut)
	}
	for _, want := range []string{
		"warning: " + f.l.Status("n2") + ": not a node status",
		"warning: " + f.l.StatusPrefix() + "x/y: not a node's key",
		"warning: " + f.l.Record("n3") + ": not a node record",
		"warning: " + f.l.RecordPrefix() + "z/w: not a node's key",
		"warning: " + f.l.ObjectStatus("n1", "routes", "a") + ": not TABLE/NAME",
		"warning: " + f.l.ObjectStatusPrefix("n1") + "routes: not TABLE/NAME",
		fmt.Sprintf("applied on 0 of 2 nodes at revision %d", f.rev), // n2: listed, its status unknown
	} {
		if !strings.Contains(out, want) {
			t.Errorf("fleet status with garbage: no %q in:\n%s", want, out)
		}
	}

	// A current key that names no generation: the node keeps its tables
	// and its revision, says why, and is not received; repaired, it
	// converges.
	before := n.multi.Revision()
	bad := put(f.l.Current(routes.TableName, etcd.ScopeAll), "not-a-generation")
	n.health.WaitFor(t, reconcilertest.LevelDegraded, "not a generation")
	if got := n.multi.Revision(); got != before {
		t.Fatalf("revision %d after the current key went bad, was %d", got, before)
	}
	settled("a current key that names no generation", int64(before), rejected)
	pub.Publish(n.status())
	waitFor(t, "fleet status: n1 not received", func() error {
		rep, err := fleetcmd.Read(ctx, f.c, f.l, fleetTables, false)
		if err != nil {
			return err
		}
		if len(rep.Nodes) != 2 || rep.Nodes[0].Desired != bad || rep.Nodes[0].Received || rep.Nodes[0].Applied || rep.Received != 0 {
			return fmt.Errorf("%+v", rep)
		}
		return nil
	})
	fixed := put(f.l.Current(routes.TableName, etcd.ScopeAll), strings.TrimSuffix(strings.TrimPrefix(routeGen, f.l.Scope(routes.TableName, etcd.ScopeAll)+"gen/"), "/"))
	settled("the current key repaired", fixed, rejected)
}

// fleetFixture is an etcd process, a prefix, and the fleet's commands
// over them.
type fleetFixture struct {
	t   *testing.T
	c   *clientv3.Client
	eps string
	l   etcd.Layout
	rev int64
}

// node publishes node's status until the test ends.
func (f *fleetFixture) node(name string, st etcd.NodeStatus) *etcd.Publisher {
	f.t.Helper()
	p, err := etcd.StartPublisher(f.t.Context(), etcd.PublisherConfig{Client: f.c, Layout: f.l, Node: name, MinInterval: time.Millisecond}, st)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { p.Stop(context.Background()) })
	return p
}

// run runs `agent fleet ARGS` in the process: exit code, stdout, stderr.
func (f *fleetFixture) run(args ...string) (int, string, string) {
	cmd := fleetCommand()
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(append(args, "--etcd-endpoints", f.eps, "--etcd-prefix", f.l.Prefix))
	code := 0
	if err := cmd.Execute(); err != nil {
		code = 1
		if ec, ok := err.(exitCoder); ok {
			code = ec.ExitCode()
		}
		fmt.Fprintln(&errOut, err)
	}
	return code, out.String(), errOut.String()
}
