package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/steadystate/steadystate/etcd"
	"github.com/steadystate/steadystate/etcd/etcdtest"
	"github.com/steadystate/steadystate/examples/netnstest"
	"github.com/steadystate/steadystate/examples/netnsutil"
)

// cliProc is a `agent fleet ...` process the test watches as it runs.
type cliProc struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
}

// start starts `agent fleet ARGS` without waiting for it.
func (f fleetCLI) start(args ...string) *cliProc {
	f.t.Helper()
	p := &cliProc{out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(f.bin, append(append([]string{"fleet"}, args...), "--etcd-endpoints", f.eps)...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	f.t.Cleanup(func() { p.cmd.Process.Kill(); <-p.done })
	return p
}

// wait waits for the process to exit and returns its exit code and output.
func (p *cliProc) wait(t *testing.T, within time.Duration) (int, string) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("%v still running after %v:\n%s", p.cmd.Args, within, p.out.String())
	}
	return p.cmd.ProcessState.ExitCode(), p.out.String()
}

// waitOutput waits until the process printed want.
func (p *cliProc) waitOutput(t *testing.T, want string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%q from %v", want, p.cmd.Args[1:4]), func() error {
		if !strings.Contains(p.out.String(), want) {
			return fmt.Errorf("output so far:\n%s", p.out.String())
		}
		return nil
	})
}

// routeWatch polls the IPv4 routes of namespaces every 20ms while a
// rollout runs and remembers which ever had a route to prefix.
type routeWatch struct {
	mu   sync.Mutex
	seen map[int]bool
	err  error
	stop chan struct{}
	done chan struct{}
}

func watchRoutes(nss []netnsutil.NS, prefix string) *routeWatch {
	w := &routeWatch{seen: map[int]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			for i, ns := range nss {
				out, err := ns.Command("ip", "-4", "route", "show", "table", "all")
				w.mu.Lock()
				if err != nil && w.err == nil {
					w.err = fmt.Errorf("ip route in %s: %v: %s", ns, err, out)
				}
				if strings.Contains(string(out), prefix) {
					w.seen[i] = true
				}
				w.mu.Unlock()
			}
			select {
			case <-w.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return w
}

// end stops the polling and returns which namespaces ever had the route.
func (w *routeWatch) end(t *testing.T) map[int]bool {
	t.Helper()
	close(w.stop)
	<-w.done
	if w.err != nil {
		t.Fatal(w.err)
	}
	return w.seen
}

// rolloutFleet is a fleet of agents in namespaces of their own on an etcd
// cluster, with the sample desired file applied.
type rolloutFleet struct {
	t      *testing.T
	cli    fleetCLI
	nodes  []string
	agents []*agentProc
	nss    []netnsutil.NS
}

func startRolloutFleet(t *testing.T, etcdBin string, members, agents int) *rolloutFleet {
	t.Helper()
	netnstest.RequireRoot(t)
	netnstest.RequireCommand(t, "iptables-restore")
	bin := buildAgent(t)
	cluster := etcdtest.StartCluster(t, etcdBin, members)
	eps := strings.Join(cluster.Endpoints(), ",")
	f := &rolloutFleet{t: t, cli: fleetCLI{t: t, bin: bin, eps: eps}}
	rev := f.cli.apply("desired.yaml", "")
	for i := range agents {
		node := fmt.Sprintf("node-%d", i)
		ns := netnstest.New(t)
		f.nodes, f.nss = append(f.nodes, node), append(f.nss, ns)
		// A status TTL long enough that a node stopped with SIGSTOP is
		// still live when a rollout that starts right after reads the
		// fleet, on a loaded machine too.
		f.agents = append(f.agents, startFleetAgent(t, bin, eps, node, ns, "--status-ttl", "10s"))
	}
	f.cli.waitApplied(rev, f.nodes...)
	for i, ns := range f.nss {
		checkKernel(t, ns, f.nodes[i], sampleKernel...)
	}
	return f
}

// file writes the sample desired file with more routes (prohibit), more
// text at the end (a rule, say), and returns its path.
func (f *rolloutFleet) file(routes []string, more string) string {
	f.t.Helper()
	sample, err := os.ReadFile("desired.yaml")
	if err != nil {
		f.t.Fatal(err)
	}
	var add strings.Builder
	for _, r := range routes {
		fmt.Fprintf(&add, "  - prefix: %s\n    type: prohibit\n", r)
	}
	text := strings.Replace(string(sample), "routes:\n", "routes:\n"+add.String(), 1) + more
	path := filepath.Join(f.t.TempDir(), "desired.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		f.t.Fatal(err)
	}
	return path
}

// history reads `fleet rollout history --format json`.
func (f *rolloutFleet) history() []etcd.Rollout {
	f.t.Helper()
	out, err := f.cli.run("rollout", "history", "--format", "json")
	var h struct{ Rollouts []etcd.Rollout }
	if err == nil {
		err = json.Unmarshal([]byte(out), &h)
	}
	if err != nil {
		f.t.Fatalf("rollout history: %v\n%s", err, out)
	}
	return h.Rollouts
}

// badRule is a rule iptables rejects (no such match).
const badRule = "  - table: filter\n    chain: INPUT\n    name: odd\n    spec: -m nosuchmatch --foo 1 -j ACCEPT\n"

// A good change rolled out with steps 1,50%,100% completes and reaches
// every kernel; one with a rule iptables rejects halts at the canary,
// which goes back (its new route gone) while no other node ever had the
// route.
func goodAndBadRollouts(t *testing.T, f *rolloutFleet) {
	good := f.file([]string{"100.64.50.0/24"}, "")
	out, err := f.cli.run("apply", "-f", good, "--rollout", "1,50%,100%", "--step-timeout", "30s")
	t.Logf("fleet apply --rollout 1,50%%,100%%:\n%s", out)
	if err != nil || !strings.Contains(out, "step 1/3 (1): passed") || !strings.Contains(out, "step 3/3 (100%): passed") ||
		!strings.Contains(out, "completed: every step passed") {
		t.Fatalf("a good rollout: %v\n%s", err, out)
	}
	h := f.history()
	if len(h) == 0 || h[len(h)-1].Result != etcd.RolloutCompleted || len(h[len(h)-1].Passed) != 3 || h[len(h)-1].Source != good {
		t.Fatalf("history after the good rollout: %+v", h)
	}
	f.cli.waitApplied(h[len(h)-1].Revision, f.nodes...)
	for i, ns := range f.nss {
		checkKernel(t, ns, f.nodes[i], append([]string{"prohibit 100.64.50.0/24"}, sampleKernel...)...)
	}

	bad := f.file([]string{"100.64.50.0/24", "100.64.66.0/24"}, badRule)
	canary := len(f.nodes) - 2
	w := watchRoutes(f.nss, "100.64.66.0/24")
	out, err = f.cli.run("apply", "-f", bad, "--rollout", "1,100%", "--canary-nodes", f.nodes[canary], "--step-timeout", "30s")
	seen := w.end(t)
	t.Logf("fleet apply --rollout 1,100%% of a rule iptables rejects:\n%s", out)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(out, "NACK "+f.nodes[canary]+": iptables-rules filter/INPUT/odd: ") ||
		!strings.Contains(out, "halted, rolled back") || !strings.Contains(out, f.nodes[canary]+": back at the previous state") {
		t.Fatalf("a rollout of a bad rule: %v\n%s", err, out)
	}
	for i := range f.nss {
		if seen[i] != (i == canary) {
			t.Errorf("node %s had the new route during the rollout: %v (the canary is %s)", f.nodes[i], seen[i], f.nodes[canary])
		}
		checkKernel(t, f.nss[i], f.nodes[i], "prohibit 100.64.50.0/24", "!100.64.66.0/24", "!nosuchmatch")
	}
	h = f.history()
	if last := h[len(h)-1]; last.Result != etcd.RolloutRolledBack || len(last.Failing) != 1 || last.Failing[0].Node != f.nodes[canary] {
		t.Fatalf("history after the bad rollout: %+v", last)
	}
	f.cli.waitApplied(h[len(h)-1].Revision, f.nodes...)
}

// TestFleetRollout: on a 3-member etcd 3.7.3 with four agents in network
// namespaces of their own: a good rollout completes, a bad one halts at
// its canary and rolls back (goodAndBadRollouts); the CLI killed during a
// step leaves the rollout paused (applies refused meanwhile), and a
// resume completes it; an abort under a live driver rolls back and stops
// the driver; of two rollouts started at once exactly one runs; a canary
// that dies during its step times the step out, and the rollout halts.
func TestFleetRollout(t *testing.T) {
	f := startRolloutFleet(t, etcdtest.Binary(t), 3, 4)
	goodAndBadRollouts(t, f)

	// Killed during the bake of step 1: paused once the driver's lease
	// expires; applies are refused meanwhile; a resume completes it.
	next := f.file([]string{"100.64.50.0/24", "100.64.51.0/24"}, "")
	p := f.cli.start("apply", "-f", next, "--rollout", "1,50%,100%", "--step-pause", "1m")
	p.waitOutput(t, "step 1/3 (1): every node answered (1 ACK, 0 NACK); pausing")
	p.cmd.Process.Signal(syscall.SIGKILL)
	if code, _ := p.wait(t, 10*time.Second); code != -1 {
		t.Fatalf("the killed CLI exited with %d", code)
	}
	killed := time.Now()
	for _, args := range [][]string{{"apply", "-f", next}, {"apply", "-f", next, "--rollout", "100%"}} {
		if out, err := f.cli.run(args...); err == nil || !strings.Contains(out, "a rollout is under way: rollout ") {
			t.Fatalf("fleet %v during a rollout: %v\n%s", args, err, out)
		}
	}
	waitFor(t, "the rollout paused", func() error {
		out, err := f.cli.run("rollout", "status")
		if err != nil || !strings.Contains(out, ": paused (no driver") || !strings.Contains(out, "at step 1 of 3; 1 node(s) switched") {
			return fmt.Errorf("%v\n%s", err, out)
		}
		return nil
	})
	t.Logf("paused %v after the CLI was killed (the driver's lease: %v)", time.Since(killed).Round(100*time.Millisecond), etcd.RolloutLeaseTTL)
	out, err := f.cli.run("rollout", "resume", "--step-pause", "0s")
	if err != nil || !strings.Contains(out, "resuming rollout ") || !strings.Contains(out, "at step 1 of 3 (1 of 4 nodes switched)") || !strings.Contains(out, "completed: every step passed") {
		t.Fatalf("fleet rollout resume: %v\n%s", err, out)
	}
	for i, ns := range f.nss {
		checkKernel(t, ns, f.nodes[i], "prohibit 100.64.50.0/24", "prohibit 100.64.51.0/24")
	}

	// An abort while the driver runs (baking step 1): the canary goes
	// back, the driver stops with exit 3.
	third := f.file([]string{"100.64.50.0/24", "100.64.51.0/24", "100.64.52.0/24"}, "")
	p = f.cli.start("apply", "-f", third, "--rollout", "1,100%", "--step-pause", "1m")
	p.waitOutput(t, "step 1/2 (1): every node answered (1 ACK, 0 NACK); pausing")
	out, err = f.cli.run("rollout", "abort", "--reason", "seen enough")
	if err != nil || !strings.Contains(out, "halted, rolled back at revision") || !strings.Contains(out, "node-0: back at the previous state") {
		t.Fatalf("fleet rollout abort: %v\n%s", err, out)
	}
	if code, out := p.wait(t, 20*time.Second); code != 3 || !strings.Contains(out, "this driver no longer drives the rollout") {
		t.Fatalf("the aborted driver: exit %d\n%s", code, out)
	}
	for i, ns := range f.nss {
		checkKernel(t, ns, f.nodes[i], "prohibit 100.64.51.0/24", "!100.64.52.0/24")
	}
	if h := f.history(); !strings.Contains(h[len(h)-1].Reason, "aborted: seen enough") {
		t.Fatalf("history after the abort: %+v", h[len(h)-1])
	}

	// Two rollouts at once: exactly one runs, and its file is in force.
	files := []string{f.file([]string{"100.64.54.0/24"}, ""), f.file([]string{"100.64.55.0/24"}, "")}
	procs := []*cliProc{f.cli.start("apply", "-f", files[0], "--rollout", "100%"), f.cli.start("apply", "-f", files[1], "--rollout", "100%")}
	won := -1
	for i, p := range procs {
		code, out := p.wait(t, 30*time.Second)
		switch {
		case code == 0 && won < 0:
			won = i
		case code == 1 && (strings.Contains(out, "a rollout is under way") || strings.Contains(out, "came first")):
		default:
			t.Fatalf("rollout %d of two at once: exit %d\n%s", i, code, out)
		}
	}
	if won < 0 {
		t.Fatal("of two rollouts at once none ran")
	}
	for i, ns := range f.nss {
		checkKernel(t, ns, f.nodes[i], fmt.Sprintf("prohibit 100.64.5%d.0/24", 4+won), fmt.Sprintf("!100.64.5%d.0/24", 5-won))
	}

	// A canary that dies during its step (stopped, then killed) never
	// answers: the step times out and the rollout halts; no other node
	// ever had the change.
	dying := f.agents[3]
	dying.cmd.Process.Signal(syscall.SIGSTOP)
	w := watchRoutes(f.nss[:3], "100.64.56.0/24")
	p = f.cli.start("apply", "-f", f.file([]string{"100.64.56.0/24"}, ""), "--rollout", "1,100%", "--canary-nodes", "node-3", "--step-timeout", "4s")
	p.waitOutput(t, "step 1/2 (1): switched node-3")
	dying.cmd.Process.Signal(syscall.SIGKILL)
	code, out := p.wait(t, 30*time.Second)
	if seen := w.end(t); len(seen) != 0 {
		t.Errorf("nodes had the route of a rollout halted at its canary: %v", seen)
	}
	if code != 1 || !strings.Contains(out, "not acknowledged within 4s: node-3") {
		t.Fatalf("a rollout whose canary died: exit %d\n%s", code, out)
	}
	t.Logf("a canary that died:\n%s", out)
}

// The same rollouts on Debian's etcd-server 3.4.23, with four agents.
func TestFleetRolloutDebianEtcd(t *testing.T) {
	f := startRolloutFleet(t, debianEtcdServer(t), 1, 4)
	goodAndBadRollouts(t, f)
}
