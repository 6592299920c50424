package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/steadystate/steadystate/etcd"
	"github.com/steadystate/steadystate/etcd/etcdtest"
	"github.com/steadystate/steadystate/etcd/fleetcmd"
	"github.com/steadystate/steadystate/examples/netnstest"
	"github.com/steadystate/steadystate/examples/netnsutil"
)

// fleetCLI runs `agent fleet ARGS --etcd-endpoints EPS`.
type fleetCLI struct {
	t   *testing.T
	bin string
	eps string
}

func (f fleetCLI) run(args ...string) (string, error) {
	out, err := exec.Command(f.bin, append(append([]string{"fleet"}, args...), "--etcd-endpoints", f.eps)...).CombinedOutput()
	return string(out), err
}

// apply applies file (to node, if not "") and returns the revision it
// printed.
func (f fleetCLI) apply(file, node string) int64 {
	f.t.Helper()
	args := []string{"apply", "-f", file}
	if node != "" {
		args = append(args, "--node", node)
	}
	out, err := f.run(args...)
	if err != nil {
		f.t.Fatalf("fleet apply %s: %v\n%s", file, err, out)
	}
	m := regexp.MustCompile(`in force at revision (\d+)`).FindStringSubmatch(out)
	if m == nil {
		f.t.Fatalf("fleet apply printed no revision: %s", out)
	}
	rev, _ := strconv.ParseInt(m[1], 10, 64)
	return rev
}

func (f fleetCLI) status() (fleetcmd.Report, error) {
	out, err := f.run("status", "--format", "json")
	if err != nil {
		return fleetcmd.Report{}, fmt.Errorf("%v: %s", err, out)
	}
	var rep fleetcmd.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		return fleetcmd.Report{}, fmt.Errorf("%v: %s", err, out)
	}
	return rep, nil
}

// waitApplied waits until `fleet status` says every one of the nodes has
// applied the desired state of revision rev.
func (f fleetCLI) waitApplied(rev int64, nodes ...string) fleetcmd.Report {
	f.t.Helper()
	var rep fleetcmd.Report
	waitFor(f.t, fmt.Sprintf("%d nodes applied at revision %d", len(nodes), rev), func() error {
		var err error
		if rep, err = f.status(); err != nil {
			return err
		}
		want := fmt.Sprintf("applied on %d of %d nodes at revision %d", len(nodes), len(nodes), rev)
		if rep.Summary != want {
			return fmt.Errorf("%q, want %q; nodes %+v", rep.Summary, want, rep.Nodes)
		}
		for i, n := range rep.Nodes {
			if n.Node != nodes[i] {
				return fmt.Errorf("nodes %+v, want %v", rep.Nodes, nodes)
			}
		}
		return nil
	})
	return rep
}

// startFleetAgent starts `agent run` in fleet mode as node on ns.
func startFleetAgent(t *testing.T, bin, eps, node string, ns netnsutil.NS, extra ...string) *agentProc {
	t.Helper()
	return startFleetAgentEnv(t, bin, eps, node, ns, nil, extra...)
}

// startFleetAgentEnv is startFleetAgent with env added to the agent's
// environment.
func startFleetAgentEnv(t *testing.T, bin, eps, node string, ns netnsutil.NS, env []string, extra ...string) *agentProc {
	t.Helper()
	dir := t.TempDir()
	a := &agentProc{t: t, bin: bin, socket: filepath.Join(dir, "agent.sock"), out: &syncBuffer{}, ns: ns}
	a.cmd = exec.Command(bin, "run", "--etcd-endpoints", eps, "--node", node, "--netns", filepath.Base(string(ns)),
		"--socket", a.socket, "--state-dir", filepath.Join(dir, "state"), "--status-ttl", "3s",
		"--prune-interval", "300ms", "--refresh-interval", "300ms")
	a.cmd.Args = append(a.cmd.Args, extra...)
	if env != nil {
		a.cmd.Env = append(os.Environ(), env...)
	}
	a.cmd.Stdout, a.cmd.Stderr = a.out, a.out
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.stop(syscall.SIGTERM) })
	return a
}

// kernelState is what the real tools show in ns: routes (v4, v6, every
// table), the filter and nat rules, and the sysctls named.
func kernelState(t *testing.T, ns netnsutil.NS, sysctls ...string) string {
	t.Helper()
	var b strings.Builder
	for _, args := range [][]string{
		{"ip", "-4", "route", "show", "table", "all"},
		{"ip", "-6", "route", "show", "table", "all"},
		{"iptables-save", "-t", "filter"},
		{"iptables-save", "-t", "nat"},
	} {
		out, err := ns.Command(args[0], args[1:]...)
		if err != nil {
			t.Fatalf("%v in %s: %v\n%s", args, ns, err, out)
		}
		b.Write(out)
	}
	for _, s := range sysctls {
		fmt.Fprintf(&b, "%s = %s\n", s, readSysctl(t, ns, s))
	}
	return b.String()
}

// checkKernel fails unless the kernel state of ns has every want and none
// of the unwanted (prefixed "!").
func checkKernel(t *testing.T, ns netnsutil.NS, node string, want ...string) {
	t.Helper()
	state := kernelState(t, ns, "net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding", "net.ipv4.conf.all.rp_filter")
	for _, w := range want {
		if neg, ok := strings.CutPrefix(w, "!"); ok {
			if strings.Contains(state, neg) {
				t.Errorf("node %s: kernel has %q:\n%s", node, neg, state)
			}
		} else if !strings.Contains(state, w) {
			t.Errorf("node %s: kernel lacks %q:\n%s", node, w, state)
		}
	}
}

// What the sample desired file makes of a namespace's kernel.
var sampleKernel = []string{
	"blackhole 192.0.2.0/24", "blackhole 2001:db8::/32", "198.51.100.0/24 dev lo proto 254 scope link metric 100",
	"198.51.100.0/24 dev lo table 100", "--dport 22 ", "-p icmp", "-s 198.51.100.0/24", "MASQUERADE",
	"net.ipv4.ip_forward = 1", "net.ipv6.conf.all.forwarding = 1", "net.ipv4.conf.all.rp_filter = 2",
}

// The sample, edited: ip_forward off, a route gone and one added, the SSH
// rule's port changed, the masquerade rule gone.
const fleetEdited = `
sysctls:
  - name: net.ipv4.ip_forward
    value: "0"
  - name: net.ipv6.conf.all.forwarding
    value: "1"
  - name: net.ipv4.conf.all.rp_filter
    value: "2"
routes:
  - prefix: 192.0.2.0/24
    type: blackhole
  - prefix: 2001:db8::/32
    type: blackhole
  - prefix: 203.0.113.0/24
    type: unreachable
  - prefix: 198.51.100.0/24
    dev: lo
    table: 100
rules:
  - table: filter
    chain: INPUT
    name: allow-ssh
    priority: 10
    spec: -p tcp --dport 2222 -j ACCEPT
  - table: filter
    chain: INPUT
    name: allow-icmp
    priority: 20
    spec: -p icmp -j ACCEPT
`

var editedKernel = []string{
	"blackhole 192.0.2.0/24", "unreachable 203.0.113.0/24", "198.51.100.0/24 dev lo table 100",
	"!198.51.100.0/24 dev lo proto 254 scope link metric 100", "--dport 2222 ", "!--dport 22 ", "!MASQUERADE",
	"net.ipv4.ip_forward = 0",
}

// TestFleetEndToEnd runs a 3-member etcd cluster and three agents in fleet
// mode, each in a network namespace of its own, and drives them with
// `agent fleet`: the sample file applied fleet-wide reaches every kernel
// and `fleet status` says 3 of 3 at its revision; an edit reaches all
// three; a broken file changes nothing; a node's own object reaches that
// node alone; a second agent with a node name in use refuses to start;
// with every etcd member down the agents keep their state and report
// Degraded, and converge when etcd is back; `fleet status --wait` waits
// for an apply; garbage under the status prefix is named in warnings and
// hides no node; a killed agent's node is lost within its status TTL,
// listed with its last status and last-seen time until `fleet forget`
// (refused for a live node); a cleanly stopped node is not listed.
func TestFleetEndToEnd(t *testing.T) {
	netnstest.RequireRoot(t)
	netnstest.RequireCommand(t, "iptables-restore")
	bin := buildAgent(t)
	cluster := etcdtest.StartCluster(t, etcdtest.Binary(t), 3)
	eps := strings.Join(cluster.Endpoints(), ",")
	fleet := fleetCLI{t: t, bin: bin, eps: eps}

	// The desired state goes in before any agent runs.
	rev1 := fleet.apply("desired.yaml", "")
	nodes := []string{"node-0", "node-1", "node-2"}
	var agents []*agentProc
	for i, node := range nodes {
		var extra []string
		if i == 1 {
			extra = []string{"--object-status"}
		}
		agents = append(agents, startFleetAgent(t, bin, eps, node, netnstest.New(t), extra...))
	}
	rep := fleet.waitApplied(rev1, nodes...)
	for i, a := range agents {
		checkKernel(t, a.ns, nodes[i], sampleKernel...)
		if err := a.probe("/readyz", 200, "ok"); err != nil {
			t.Error(err)
		}
	}
	for _, n := range rep.Nodes {
		if n.Objects["Done"] != 11 || len(n.Errors) != 0 {
			t.Errorf("node %s: objects %v, errors %v; want 11 Done", n.Node, n.Objects, n.Errors)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// `fleet watch` follows: it prints the view now and again after the
	// edit below.
	watch := exec.Command(bin, "fleet", "watch", "--format", "json", "--etcd-endpoints", eps)
	watchOut := &syncBuffer{}
	watch.Stdout, watch.Stderr = watchOut, watchOut
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { watch.Process.Signal(syscall.SIGTERM); watch.Wait() })
	watched := func(rev int64) func() error {
		return func() error {
			if want := fmt.Sprintf(`"summary":"applied on 3 of 3 nodes at revision %d"`, rev); !strings.Contains(watchOut.String(), want) {
				return fmt.Errorf("no %s in:\n%s", want, watchOut.String())
			}
			return nil
		}
	}
	waitFor(t, "fleet watch printing the state now", watched(rev1))

	// A change of one table in place (one route more) reads "applied on 3
	// of 3" within seconds: the node's one reflector reaches the apply's
	// revision without waiting for etcd's progress notifications.
	sample, err := os.ReadFile("desired.yaml")
	if err != nil {
		t.Fatal(err)
	}
	oneRoute := filepath.Join(t.TempDir(), "one-route.yaml")
	if err := os.WriteFile(oneRoute, []byte(strings.Replace(string(sample), "routes:\n", "routes:\n  - prefix: 100.64.9.0/24\n    type: prohibit\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	applied := time.Now()
	revOne := fleet.apply(oneRoute, "")
	fleet.waitApplied(revOne, nodes...)
	if took := time.Since(applied); took > 5*time.Second {
		t.Errorf("a one-route change read applied on 3 of 3 after %v, want within seconds", took)
	} else {
		t.Logf("a one-route change read applied on 3 of 3 %v after fleet apply started", took.Round(time.Millisecond))
	}
	for i, a := range agents {
		checkKernel(t, a.ns, nodes[i], append([]string{"prohibit 100.64.9.0/24"}, sampleKernel...)...)
	}

	// An edit reaches all three.
	edited := filepath.Join(t.TempDir(), "edited.yaml")
	if err := os.WriteFile(edited, []byte(fleetEdited), 0o644); err != nil {
		t.Fatal(err)
	}
	rev2 := fleet.apply(edited, "")
	if rev2 <= rev1 {
		t.Fatalf("edit in force at revision %d, not after %d", rev2, rev1)
	}
	// A script waits for it with fleet status --wait: exit 0, the status
	// printed, the summary last.
	out, err := fleet.run("status", "--wait", "--timeout", "60s")
	if want := fmt.Sprintf("applied on 3 of 3 nodes at revision %d", rev2); err != nil || !strings.HasSuffix(out, want+"\n") {
		t.Fatalf("fleet status --wait: %v\n%s(want last %q)", err, out, want)
	}
	fleet.waitApplied(rev2, nodes...)
	for i, a := range agents {
		checkKernel(t, a.ns, nodes[i], editedKernel...)
	}
	waitFor(t, "fleet watch printing the edit applied", watched(rev2))

	// A broken file writes nothing: the error names the file and the
	// entry; the revision and every kernel stay.
	broken := filepath.Join(t.TempDir(), "broken.yaml")
	if err := os.WriteFile(broken, []byte("routes:\n  - prefix: 10.0.0.1/8\n    type: blackhole\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := fleet.run("apply", "-f", broken); err == nil || !strings.Contains(out, broken) ||
		!strings.Contains(out, "routes[0]") || !strings.Contains(out, "not applied") {
		t.Fatalf("fleet apply of a broken file: %v\n%s", err, out)
	}
	if rep, err := fleet.status(); err != nil || rep.Revision != rev2 || rep.Applied != 3 {
		t.Fatalf("after the broken file: %+v, %v; want still 3 of 3 at revision %d", rep, err, rev2)
	}
	for i, a := range agents {
		checkKernel(t, a.ns, nodes[i], editedKernel...)
	}

	// Garbage under the status prefix (another tool's key, a status that
	// is not JSON) is named in a warning; the unreadable status is listed
	// as a node whose status is unknown (not applied), every node still
	// shows.
	c := cluster.Client()
	l := etcd.Layout{}
	garbage := []string{l.Status("bogus"), l.StatusPrefix() + "a/b"}
	for _, k := range garbage {
		if _, err := c.Put(t.Context(), k, "garbage{"); err != nil {
			t.Fatal(err)
		}
	}
	out, err = fleet.run("status")
	for _, want := range []string{"warning: " + garbage[0] + ": not a node status", "warning: " + garbage[1] + ": not a node's key",
		"node-0 ", "node-1 ", "node-2 ", "bogus ", fmt.Sprintf("applied on 3 of 4 nodes at revision %d\n", rev2)} {
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("fleet status with garbage: %v; no %q in:\n%s", err, want, out)
		}
	}
	if rep, err := fleet.status(); err != nil || len(rep.Warnings) != 2 || len(rep.Nodes) != 4 {
		t.Fatalf("fleet status --format json with garbage: %+v, %v", rep, err)
	}
	for _, k := range garbage {
		if _, err := c.Delete(t.Context(), k); err != nil {
			t.Fatal(err)
		}
	}

	// A node's own object reaches that node alone.
	own := filepath.Join(t.TempDir(), "own.yaml")
	if err := os.WriteFile(own, []byte("routes:\n  - prefix: 100.64.0.0/10\n    type: prohibit\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rev3 := fleet.apply(own, "node-1")
	rep = fleet.waitApplied(rev3, nodes...)
	for i, a := range agents {
		if i == 1 {
			checkKernel(t, a.ns, nodes[i], append([]string{"prohibit 100.64.0.0/10"}, editedKernel...)...)
		} else {
			checkKernel(t, a.ns, nodes[i], append([]string{"!100.64.0.0/10"}, editedKernel...)...)
		}
	}
	if rep.Nodes[0].Desired != rev2 || rep.Nodes[1].Desired != rev3 {
		t.Errorf("desired revisions %d, %d; want %d (fleet-wide) and %d (node-1's own)", rep.Nodes[0].Desired, rep.Nodes[1].Desired, rev2, rev3)
	}

	// A second live agent with a node name in use refuses to start, before
	// it changes anything.
	dup := startFleetAgent(t, bin, eps, "node-0", netnstest.New(t))
	done := make(chan error, 1)
	go func() { done <- dup.cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(dup.out.String(), "node name in use") {
			t.Fatalf("second agent as node-0: %v\n%s", err, dup.out.String())
		}
		if state := kernelState(t, dup.ns); strings.Contains(state, "192.0.2.0/24") {
			t.Fatalf("the refused agent applied routes:\n%s", state)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("second agent as node-0 still running after 30s:\n%s", dup.out.String())
	}

	// A prefix whose layout version is unknown (a newer steadystate wrote
	// it) is refused by an agent at start and by every fleet command.
	if _, err := c.Put(t.Context(), etcd.Layout{Prefix: "/future"}.VersionKey(), "99"); err != nil {
		t.Fatal(err)
	}
	future := startFleetAgent(t, bin, eps, "node-9", netnstest.New(t), "--etcd-prefix", "/future")
	if err := future.cmd.Wait(); err == nil || !strings.Contains(future.out.String(), `unknown key layout version: /future/layout holds "99"`) {
		t.Fatalf("an agent on an unknown layout: %v\n%s", err, future.out.String())
	}
	for _, args := range [][]string{{"status"}, {"apply", "-f", "desired.yaml"}, {"forget", "node-9"}, {"status", "--wait"}, {"watch"}} {
		if out, err := fleet.run(append(args, "--etcd-prefix", "/future")...); err == nil || !strings.Contains(out, "unknown key layout version") {
			t.Fatalf("fleet %v on an unknown layout: %v\n%s", args, err, out)
		}
	}

	// Every etcd member down: the agents keep what they applied and report
	// Degraded; back, they converge on a change made meanwhile... made
	// after the cluster is back (nothing can be written while it is down).
	for i := range cluster.Members {
		cluster.Kill(i)
	}
	for i, a := range agents {
		waitFor(t, nodes[i]+" Degraded with etcd down", func() error { return a.probe("/healthz", 503, "Degraded") })
		checkKernel(t, a.ns, nodes[i], editedKernel...)
	}
	for i := range cluster.Members {
		cluster.Restart(i)
	}
	cluster.WaitHealthy()
	rev4 := fleet.apply("desired.yaml", "")
	fleet.waitApplied(rev4, nodes...)
	for i, a := range agents {
		checkKernel(t, a.ns, nodes[i], sampleKernel...)
		waitFor(t, nodes[i]+" healthy again", func() error { return a.probe("/healthz", 200, `"level": "OK"`) })
	}

	// A killed agent's status expires with its lease (3s here): the node
	// is lost, listed with its last status and when it was last seen, and
	// counted, until it is forgotten.
	agents[2].cmd.Process.Kill()
	killed := time.Now()
	waitFor(t, "node-2 lost", func() error {
		rep, err := fleet.status()
		if err != nil {
			return err
		}
		if len(rep.Nodes) != 3 || rep.Nodes[2].State != "lost" || rep.Summary != fmt.Sprintf("applied on 2 of 3 nodes at revision %d (1 lost)", rev4) {
			return fmt.Errorf("%s: %+v", rep.Summary, rep.Nodes)
		}
		return nil
	})
	if lost := time.Since(killed); lost > 3*time.Second+5*time.Second {
		t.Errorf("node-2 lost %v after it was killed; its TTL is 3s", lost)
	} else {
		t.Logf("node-2 lost %v after SIGKILL (TTL 3s)", lost.Round(10*time.Millisecond))
	}
	rep, err = fleet.status()
	if err != nil {
		t.Fatal(err)
	}
	if n := rep.Nodes[2]; n.Node != "node-2" || n.Revision < rev4 || n.LastSeen.After(killed) || killed.Sub(n.LastSeen) > time.Minute+time.Second ||
		n.SeenRevision == 0 || n.Applied || n.Received {
		t.Fatalf("lost node-2: %+v (killed at %v)", n, killed)
	}
	out, err = fleet.run("status")
	row := regexp.MustCompile(`(?m)^node-2 +lost \(last seen \S+ at revision \d+\) +(\d+) `).FindStringSubmatch(out)
	if err != nil || row == nil || row[1] != strconv.FormatInt(rep.Nodes[2].Revision, 10) {
		t.Fatalf("fleet status: no row of node-2 lost, with its last seen and revision:\n%s", out)
	}

	// A rule iptables rejects, for node-1 alone (which keeps object
	// statuses): node-1 reports the error, the fleet view says so and
	// names the object; node-0 is unaffected.
	bad := filepath.Join(t.TempDir(), "bad-rule.yaml")
	if err := os.WriteFile(bad, []byte("rules:\n  - table: filter\n    chain: INPUT\n    name: odd\n    spec: -m nosuchmatch --foo 1 -j ACCEPT\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rev5 := fleet.apply(bad, "node-1")
	waitFor(t, "node-1's failing rule in the fleet view", func() error {
		out, err := fleet.run("status", "--objects")
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		for _, want := range []string{"node-1: iptables-rules filter/INPUT/odd: Error", fmt.Sprintf("applied on 1 of 3 nodes at revision %d (1 lost)", rev5)} {
			if !strings.Contains(out, want) {
				return fmt.Errorf("no %q in:\n%s", want, out)
			}
		}
		return nil
	})
	rep, err = fleet.status()
	if err != nil {
		t.Fatal(err)
	}
	if n := rep.Nodes[1]; n.Node != "node-1" || n.Applied || n.Objects["Error"] != 1 || len(n.Errors) != 1 || !strings.Contains(n.Errors[0], "filter/INPUT/odd") {
		t.Fatalf("node-1 with a rule iptables rejects: %+v", n)
	}

	// A value the agent cannot take, written past `fleet apply`'s checks
	// (another tool, a newer CLI): node-0 keeps its kernel, reports the
	// object rejected and is not counted as applied.
	rev6, err := etcd.ApplyTables(t.Context(), c, etcd.Layout{}, etcd.NodeScope("node-0"),
		map[string]map[string][]byte{"routes": {fleetName("254/10.0.0.0/8/0"): []byte(`{"prefix":"10.0.0.1/8","type":"blackhole"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "node-0 reporting the rejected route", func() error {
		rep, err := fleet.status()
		if err != nil {
			return err
		}
		n := rep.Nodes[0]
		if n.Node != "node-0" || n.Applied || n.Objects[etcd.Rejected] != 1 || len(n.Errors) != 1 ||
			!strings.Contains(n.Errors[0], "routes 254/10.0.0.0/8/0: rejected: ") || !strings.Contains(n.Errors[0], "host bits") || rep.Revision < rev6 {
			return fmt.Errorf("node-0: %+v (revision %d, want >= %d)", n, rep.Revision, rev6)
		}
		return nil
	})
	checkKernel(t, agents[0].ns, nodes[0], append([]string{"!10.0.0.0/8"}, sampleKernel...)...)

	// fleet forget: refused for a live node; a lost one leaves the view.
	if out, err := fleet.run("forget", "node-0"); err == nil || !strings.Contains(out, "forget node-0: node is live") || !strings.Contains(out, "stop it first") {
		t.Fatalf("fleet forget of a live node: %v\n%s", err, out)
	}
	if out, err := fleet.run("forget", "node-2"); err != nil || !strings.Contains(out, "forgot node node-2") {
		t.Fatalf("fleet forget node-2: %v\n%s", err, out)
	}
	if rep, err := fleet.status(); err != nil || len(rep.Nodes) != 2 || rep.Lost != 0 || strings.Contains(rep.Summary, "lost") {
		t.Fatalf("after forget: %+v, %v", rep, err)
	}

	// A clean stop leaves the fleet at once (the lease revoked) and logs
	// no failure on the way (the client closes after the reflectors).
	if err := agents[0].stop(syscall.SIGTERM); err != nil {
		t.Fatalf("node-0 stopped with %v", err)
	}
	_, stopping, _ := strings.Cut(agents[0].out.String(), "Signal received")
	if strings.Contains(stopping, "level=WARN") || strings.Contains(stopping, "level=ERROR") {
		t.Errorf("node-0's clean stop logged problems:\n%s", stopping)
	}
	if rep, err := fleet.status(); err != nil || len(rep.Nodes) != 1 || rep.Nodes[0].Node != "node-1" || rep.Lost != 0 {
		t.Fatalf("after node-0 stopped: %+v, %v; want node-1 alone, none lost", rep.Nodes, err)
	}
}
