package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"go.uber.org/goleak"

	"github.com/steadystate/steadystate/examples/netnstest"
	"github.com/steadystate/steadystate/examples/netnsutil"
	"github.com/steadystate/steadystate/hive/health"
	"github.com/steadystate/steadystate/reconciler"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// agentProc is a running agent binary started by a test.
type agentProc struct {
	t      testing.TB
	bin    string
	socket string
	cmd    *exec.Cmd
	out    *syncBuffer
	ns     netnsutil.NS
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
	buildDir  string
)

// buildAgent builds the agent binary once per test run.
func buildAgent(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "agent-test-")
		if buildErr != nil {
			return
		}
		builtBin = filepath.Join(buildDir, "agent")
		if out, err := exec.Command("go", "build", "-o", builtBin, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// startAgent starts `agent run` on desired in its sandbox, or with extra
// arguments (such as --netns NAME) in ns.
func startAgent(t testing.TB, bin, desired string, ns netnsutil.NS, extra ...string) *agentProc {
	t.Helper()
	return startAgentEnv(t, bin, desired, ns, nil, extra...)
}

// startAgentEnv is startAgent with env added to the agent's environment.
func startAgentEnv(t testing.TB, bin, desired string, ns netnsutil.NS, env []string, extra ...string) *agentProc {
	t.Helper()
	a := &agentProc{t: t, bin: bin, socket: filepath.Join(t.TempDir(), "agent.sock"), out: &syncBuffer{}}
	args := []string{"run", "--desired", desired, "--socket", a.socket, "--settle-time", "50ms", "--reload-interval", "1s", "--prune-interval", "300ms", "--refresh-interval", "1h"}
	if ns != "" {
		// On a named namespace the record would default to the host's
		// state root: keep it in the test's.
		args = append(args, "--state-dir", filepath.Join(t.TempDir(), "state"))
	}
	a.cmd = exec.Command(bin, append(args, extra...)...)
	a.cmd.Stdout, a.cmd.Stderr = a.out, a.out
	if env != nil {
		a.cmd.Env = append(os.Environ(), env...)
	}
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a.ns = ns
	if ns == "" {
		a.ns = netnsutil.NS(fmt.Sprintf("/var/run/netns/steadystate-agent-%d", a.cmd.Process.Pid))
	}
	t.Cleanup(func() { a.stop(syscall.SIGTERM) })
	return a
}

// stop ends the agent as a user would, with sig, and waits for it (SIGKILL
// after 20s); then it sweeps what the agent may have left: its sandbox
// namespace is removed if it is still there, and it is an error if it is
// after a clean exit.
func (a *agentProc) stop(sig os.Signal) error {
	var err error
	if a.cmd.ProcessState == nil {
		a.cmd.Process.Signal(sig)
		done := make(chan error, 1)
		go func() { done <- a.cmd.Wait() }()
		select {
		case err = <-done:
		case <-time.After(20 * time.Second):
			a.t.Errorf("agent did not exit after %v; killing it", sig)
			a.cmd.Process.Kill()
			err = <-done
		}
	}
	if name := sandboxName(a.cmd.Process.Pid); string(a.ns) == netnsutil.NamedDir+"/"+name {
		if _, serr := os.Stat(string(a.ns)); serr == nil {
			if a.cmd.ProcessState.Success() {
				a.t.Errorf("sandbox namespace %s left behind after a clean exit", a.ns)
			}
			if derr := netns.DeleteNamed(name); derr != nil {
				a.t.Errorf("removing the leftover namespace %s: %v", name, derr)
			}
		}
	}
	if a.t.Failed() {
		a.t.Logf("agent output:\n%s", a.out.String())
	}
	return err
}

// cli runs an agent client command against the running agent.
func (a *agentProc) cli(args ...string) (string, error) {
	args = append(args, "--socket", a.socket)
	out, err := exec.Command(a.bin, args...).CombinedOutput()
	return string(out), err
}

// get gets path from the agent's socket: the status code and the body.
func (a *agentProc) get(path string) (int, string, error) {
	c := unixHTTPClient(a.socket)
	defer c.CloseIdleConnections()
	resp, err := c.Get("http://agent" + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// probe checks that GET path answers code (and a body containing want).
func (a *agentProc) probe(path string, code int, want string) error {
	got, body, err := a.get(path)
	if err != nil {
		return err
	}
	if got != code || !strings.Contains(body, want) {
		return fmt.Errorf("GET %s: %d %q, want %d and %q", path, got, body, code, want)
	}
	return nil
}

// healthy checks that /healthz answers 200 with the root OK and no scope
// of the tree Unknown.
func (a *agentProc) healthy() error {
	code, body, err := a.get("/healthz")
	if err != nil {
		return err
	}
	var st health.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		return fmt.Errorf("GET /healthz: %v: %s", err, body)
	}
	if code != 200 || st.Level != health.LevelOK {
		return fmt.Errorf("GET /healthz: %d, root %s, want 200 and OK:\n%s", code, st.Level, body)
	}
	var unknown func(s health.Status) error
	unknown = func(s health.Status) error {
		if s.Level == health.LevelUnknown {
			return fmt.Errorf("scope %q is Unknown:\n%s", s.ID, body)
		}
		for _, c := range s.Children {
			if err := unknown(c); err != nil {
				return err
			}
		}
		return nil
	}
	return unknown(st)
}

func (a *agentProc) status() (*statusReport, error) {
	out, err := a.cli("status", "--format", "json")
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, out)
	}
	var r statusReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		return nil, fmt.Errorf("%v: %s", err, out)
	}
	return &r, nil
}

// writeFile replaces path with data at once (write a temporary file,
// rename it over path), so the agent never reads a half-written file.
func writeFile(t *testing.T, path string, data []byte, perm os.FileMode) error {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// waitFor polls cond (every 100ms, up to 30s) until it returns nil.
func waitFor(t testing.TB, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s: %v", what, err)
}

// allDone checks that every table has exactly want objects, all Done.
func allDone(r *statusReport, want map[string]int) error {
	for _, ts := range r.Tables {
		if ts.Objects != want[ts.Name] || ts.ByStatus["Done"] != want[ts.Name] {
			return fmt.Errorf("table %s: %d objects, by status %v; want %d Done", ts.Name, ts.Objects, ts.ByStatus, want[ts.Name])
		}
	}
	return nil
}

func findHealth(s healthLike, id string) (healthLike, bool) {
	if s.ID == id {
		return s, true
	}
	for _, c := range s.Children {
		if f, ok := findHealth(c, id); ok {
			return f, true
		}
	}
	return healthLike{}, false
}

const desiredV1 = `
sysctls:
  - name: net.ipv4.ip_forward
    value: "1"
routes:
  - prefix: 192.0.2.0/24
    type: blackhole
  - prefix: 198.51.100.0/24
    dev: lo
    metric: 100
rules:
  - table: filter
    chain: INPUT
    name: allow-ssh
    priority: 10
    spec: -p tcp --dport 22 -j ACCEPT
`

const desiredV2 = `
sysctls:
  - name: net.ipv4.ip_forward
    value: "1"
routes:
  - prefix: 192.0.2.0/24
    type: blackhole
  - prefix: 203.0.113.0/24
    type: blackhole
rules:
  - table: filter
    chain: INPUT
    name: allow-ssh
    priority: 10
    spec: -p tcp --dport 2222 -j ACCEPT
`

// TestAgentEndToEnd runs the built agent in its default sandbox: apply a
// file, edit it, break it, stop the agent.
func TestAgentEndToEnd(t *testing.T) {
	netnstest.RequireRoot(t)
	netnstest.RequireCommand(t, "iptables-restore")
	bin := buildAgent(t)
	desired := filepath.Join(t.TempDir(), "desired.yaml")
	if err := writeFile(t, desired, []byte(desiredV1), 0o644); err != nil {
		t.Fatal(err)
	}
	hostForward, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	a := startAgent(t, bin, desired, "")

	waitFor(t, "everything Done", func() error {
		r, err := a.status()
		if err != nil {
			return err
		}
		return allDone(r, map[string]int{"sysctls": 1, "routes": 2, "iptables-rules": 1})
	})

	// Probes and metrics: ready, live, healthy (the whole tree OK, the
	// inert fleet module too, no scope Unknown); one metric prefix.
	for _, p := range []struct {
		path string
		want string
	}{{"/readyz", "ok"}, {"/livez", "ok"}} {
		if err := a.probe(p.path, 200, p.want); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "/healthz 200 with no scope Unknown", a.healthy)
	if r, err := a.status(); err != nil {
		t.Fatal(err)
	} else if f, ok := findHealth(r.Health, "agent.fleet"); ok {
		t.Fatalf("the fleet module in file mode: %+v, want it absent (only the active mode's module is built)", f)
	}
	_, metrics, err := a.get("/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`steadystate_agent_desired_loads_total{result="applied"} 1`,
		`steadystate_agent_desired_loads_total{result="rejected"} 0`,
		`steadystate_reconciler_objects{reconciler="routes",status="Done",table="routes"} 2`,
		`steadystate_statedb_table_objects{table="routes"} 2`,
		`steadystate_health_scopes{level="OK",module="agent.desired"}`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, line := range strings.Split(metrics, "\n") {
		name, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(line, "# HELP "), "# TYPE "), " ")
		name, _, _ = strings.Cut(name, "{")
		if name != "" && !strings.HasPrefix(name, "steadystate_") && !strings.HasPrefix(name, "go_") &&
			!strings.HasPrefix(name, "process_") && !strings.HasPrefix(name, "promhttp_") {
			t.Errorf("metric %s: not steadystate_*", name)
		}
	}

	// The real kernel state of the sandbox, seen with the real tools.
	routes, err := a.ns.Command("ip", "route", "show")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(routes), "blackhole 192.0.2.0/24") || !strings.Contains(string(routes), "198.51.100.0/24 dev lo") {
		t.Fatalf("routes in sandbox:\n%s", routes)
	}
	rules, err := a.ns.Command("iptables-save", "-t", "filter")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rules), "--dport 22 ") || !strings.Contains(string(rules), "-j ACCEPT") {
		t.Fatalf("rules in sandbox:\n%s", rules)
	}
	var fwd []byte
	a.ns.Do(func() error { fwd, err = os.ReadFile("/proc/sys/net/ipv4/ip_forward"); return err })
	if strings.TrimSpace(string(fwd)) != "1" {
		t.Fatalf("ip_forward in sandbox = %q", fwd)
	}
	if now, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); !bytes.Equal(now, hostForward) {
		t.Fatalf("the host's ip_forward changed: %q -> %q", hostForward, now)
	}

	// Drift is repaired as the targets' watches report it (there is no
	// refresh by age within the test: --refresh-interval 1h), and
	// leftovers of the agent's own protocol are pruned by the periodic
	// full reconciliation; foreign routes stay.
	if _, err := a.ns.Command("ip", "route", "del", "192.0.2.0/24"); err != nil {
		t.Fatal(err)
	}
	if err := a.ns.Do(func() error { return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("0"), 0) }); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ns.Command("iptables", "-D", "STEADYSTATE-INPUT", "1"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ns.Command("ip", "route", "add", "blackhole", "203.0.113.99/32", "proto", "254"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ns.Command("ip", "route", "add", "blackhole", "203.0.113.77/32", "proto", "static"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "drift repaired and leftovers pruned", func() error {
		routes, err := a.ns.Command("ip", "route", "show")
		if err != nil {
			return err
		}
		if !strings.Contains(string(routes), "blackhole 192.0.2.0/24") || strings.Contains(string(routes), "203.0.113.99") || !strings.Contains(string(routes), "203.0.113.77") {
			return fmt.Errorf("routes:\n%s", routes)
		}
		// The status shows what the reconciler repaired and pruned.
		r, err := a.status()
		if err != nil {
			return err
		}
		for _, ts := range r.Tables {
			if ts.Name == "routes" && (ts.DriftRepaired < 1 || ts.Pruned < 1) {
				return fmt.Errorf("routes status: drift repaired %d, pruned %d; want at least 1 each", ts.DriftRepaired, ts.Pruned)
			}
			if ts.DriftRepaired < 1 {
				return fmt.Errorf("%s status: no drift repaired", ts.Name)
			}
		}
		return nil
	})
	// The status names the latest repairs: what, when, how found.
	r, err := a.status()
	if err != nil {
		t.Fatal(err)
	}
	wantRepair := map[string]string{
		"sysctls":        "change sysctl net.ipv4.ip_forward: 0 -> 1",
		"routes":         "add route 192.0.2.0/24: blackhole",
		"iptables-rules": "add rule filter/INPUT/allow-ssh",
	}
	for _, ts := range r.Tables {
		if len(ts.RecentRepairs) == 0 {
			t.Fatalf("%s: no recent repairs in the status", ts.Name)
		}
		rep := ts.RecentRepairs[len(ts.RecentRepairs)-1] // the oldest: the first repair
		// An iptables prune puts deleted rules back too, and the test's
		// prunes come every 300ms: on a loaded machine one may be first.
		found := rep.FoundBy == reconciler.FoundByEvent || ts.Name == "iptables-rules" && rep.FoundBy == reconciler.FoundByPrune
		if !found || rep.At.IsZero() || !strings.Contains(rep.Changes.String(), wantRepair[ts.Name]) {
			t.Errorf("%s: repair %+v, want %q found by event", ts.Name, rep, wantRepair[ts.Name])
		}
	}
	if out, err := a.cli("status"); err != nil || !strings.Contains(out, "DRIFT REPAIRED") ||
		!strings.Contains(out, "Drift repaired (latest first):") || !strings.Contains(out, "add route 192.0.2.0/24: blackhole") {
		t.Fatalf("status: %v\n%s", err, out)
	} else {
		t.Logf("agent status:\n%s", out)
	}
	if out, err := a.cli("status", "--format", "json"); err != nil || !strings.Contains(out, `"driftRepaired": `) || !strings.Contains(out, `"recentRepairs": [`) {
		t.Fatalf("status --format json: %v\n%s", err, out)
	}

	// The db commands (statedbcmd's) render the tables.
	out, err := a.cli("db", "show", "routes")
	if err != nil || !strings.Contains(out, "192.0.2.0/24") || !strings.Contains(out, "Done") {
		t.Fatalf("db show routes: %v\n%s", err, out)
	}
	out, err = a.cli("db", "show", "routes", "--format", "json")
	var objs []map[string]any
	if err != nil || json.Unmarshal([]byte(out), &objs) != nil || len(objs) != 2 {
		t.Fatalf("db show routes --format json: %v\n%s", err, out)
	}
	out, err = a.cli("db", "tables")
	if err != nil || !strings.Contains(out, "sysctls") || !strings.Contains(out, "iptables-rules") {
		t.Fatalf("db tables: %v\n%s", err, out)
	}
	// Which desired route covers an address: the routes' LPM index.
	out, err = a.cli("db", "lpm", "routes", "covering", "192.0.2.77")
	if err != nil || !strings.Contains(out, "192.0.2.0/24") {
		t.Fatalf("db lpm routes covering 192.0.2.77: %v\n%s", err, out)
	}
	checkDBQueries(t, a)

	// Edit the file: a route goes, one comes, a rule changes.
	if err := writeFile(t, desired, []byte(desiredV2), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the edit applied", func() error {
		routes, err := a.ns.Command("ip", "route", "show")
		if err != nil {
			return err
		}
		if strings.Contains(string(routes), "198.51.100.0/24") || !strings.Contains(string(routes), "blackhole 203.0.113.0/24") {
			return fmt.Errorf("routes:\n%s", routes)
		}
		rules, err := a.ns.Command("iptables-save", "-t", "filter")
		if err != nil {
			return err
		}
		if !strings.Contains(string(rules), "--dport 2222 ") || strings.Contains(string(rules), "--dport 22 ") {
			return fmt.Errorf("rules:\n%s", rules)
		}
		r, err := a.status()
		if err != nil {
			return err
		}
		return allDone(r, map[string]int{"sysctls": 1, "routes": 2, "iptables-rules": 1})
	})

	// A broken file is reported and changes nothing.
	if err := writeFile(t, desired, []byte("routes:\n  - prefix: 10.0.0.0/33\n    type: blackhole\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Degraded health naming the file", func() error {
		r, err := a.status()
		if err != nil {
			return err
		}
		h, ok := findHealth(healthLike(r.Health), "agent.desired.desired-file")
		if !ok {
			return fmt.Errorf("no health scope agent.desired.desired-file in %+v", r.Health)
		}
		if h.Level != "Degraded" || !strings.Contains(h.Message+h.Error, desired) {
			return fmt.Errorf("loader health = %+v", h)
		}
		return allDone(r, map[string]int{"sysctls": 1, "routes": 2, "iptables-rules": 1})
	})
	// Degraded: /healthz says 503; still ready and live; the rejection
	// counted.
	if err := a.probe("/healthz", 503, `"level": "Degraded"`); err != nil {
		t.Error(err)
	}
	if err := a.probe("/readyz", 200, "ok"); err != nil {
		t.Error(err)
	}
	if _, metrics, err := a.get("/metrics"); err != nil || !strings.Contains(metrics, `steadystate_agent_desired_loads_total{result="rejected"} 1`) {
		t.Errorf("/metrics after a rejected file: %v\n%s", err, metrics)
	}
	if routes, _ := a.ns.Command("ip", "route", "show"); !strings.Contains(string(routes), "blackhole 203.0.113.0/24") {
		t.Fatalf("routes changed after a broken file:\n%s", routes)
	}

	// SIGTERM: a clean exit, the sandbox and the socket removed.
	if err := a.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("agent exit: %v", err)
	}
	if _, err := os.Stat(string(a.ns)); !os.IsNotExist(err) {
		t.Fatalf("sandbox namespace %s still exists: %v", a.ns, err)
	}
	if _, err := os.Stat(a.socket); !os.IsNotExist(err) {
		t.Fatalf("socket %s still exists: %v", a.socket, err)
	}
	if state := filepath.Join(runDir(), fmt.Sprintf("sandbox-%d", a.cmd.Process.Pid)); !os.IsNotExist(func() error { _, err := os.Stat(state); return err }()) {
		t.Fatalf("the sandbox's state directory %s still exists", state)
	}
}

// TestSandboxKeepsHostSysctls: in the sandbox, a sysctl that is not per
// network namespace (kernel.*) would change the whole machine, so it is an
// Error on its object and the host keeps its value.
func TestSandboxKeepsHostSysctls(t *testing.T) {
	netnstest.RequireRoot(t)
	netnstest.RequireCommand(t, "iptables-restore")
	bin := buildAgent(t)
	before, err := os.ReadFile("/proc/sys/kernel/domainname")
	if err != nil {
		t.Fatal(err)
	}
	desired := filepath.Join(t.TempDir(), "desired.yaml")
	file := "sysctls:\n  - name: kernel.domainname\n    value: steadystate-test\n  - name: net.ipv4.ip_forward\n    value: \"1\"\n"
	if err := writeFile(t, desired, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, bin, desired, "")
	waitFor(t, "kernel.domainname in Error, ip_forward Done", func() error {
		r, err := a.status()
		if err != nil {
			return err
		}
		for _, ts := range r.Tables {
			if ts.Name == "sysctls" && (ts.ByStatus["Error"] != 1 || ts.ByStatus["Done"] != 1) {
				return fmt.Errorf("sysctls by status: %v", ts.ByStatus)
			}
		}
		return nil
	})
	out, err := a.cli("db", "show", "sysctls")
	if err != nil || !strings.Contains(out, "not a network-namespace sysctl") {
		t.Fatalf("db show sysctls: %v\n%s", err, out)
	}
	if after, _ := os.ReadFile("/proc/sys/kernel/domainname"); !bytes.Equal(after, before) {
		t.Fatalf("the host's kernel.domainname changed: %q -> %q", before, after)
	}
	if err := a.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("agent exit: %v", err)
	}
}
