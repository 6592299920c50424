package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/steadystate/steadystate/etcd/etcdtest"
	"github.com/steadystate/steadystate/examples/netnstest"
)

// notifyTimeout is how long a test waits for a notification: generous,
// the machine may be loaded.
const notifyTimeout = 2 * time.Minute

// stopNotified stops a with SIGTERM and returns what it sent since the
// last read of sock, which must be STOPPING=1 alone.
func stopNotified(t *testing.T, a *agentProc, sock *notifySocket) []notification {
	t.Helper()
	if err := a.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("agent exit: %v", err)
	}
	rest, err := sock.queued()
	if err != nil {
		t.Fatal(err)
	}
	wantNotifications(t, rest, "STOPPING=1")
	return rest
}

// wantNotifications checks got's lines, in order, against want (each a
// notification's lines joined by "|").
func wantNotifications(t *testing.T, got []notification, want ...string) {
	t.Helper()
	var lines []string
	for _, m := range got {
		lines = append(lines, strings.Join(m.lines, "|"))
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("notifications:\n  %s\nwant:\n  %s", strings.Join(lines, "\n  "), strings.Join(want, "\n  "))
	}
}

// An agent under systemd (NOTIFY_SOCKET): STATUS while it loads, READY=1
// once, when every object was tried (a route on a device that does not
// exist, in Error, counts), with /readyz 200 right after it and the
// counts in its STATUS; STOPPING=1 on SIGTERM, and nothing after.
func TestNotifyReadyAndStopping(t *testing.T) {
	netnstest.RequireRoot(t)
	netnstest.RequireCommand(t, "iptables-restore")
	bin := buildAgent(t)
	desired := filepath.Join(t.TempDir(), "desired.yaml")
	file := "sysctls:\n  - name: net.ipv4.ip_forward\n    value: \"1\"\nroutes:\n  - prefix: 192.0.2.0/24\n    type: blackhole\n  - prefix: 198.51.100.0/24\n    dev: nosuch0\n"
	if err := writeFile(t, desired, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	a, sock, _, got := startReady(t, bin, desired, "", notifyTimeout)
	wantNotifications(t, got,
		"STATUS=loading the desired state from "+desired,
		"STATUS=loaded "+desired+": 3 objects (version 1)",
		"READY=1|STATUS=ready: sysctls 1 (1 Done), routes 2 (1 Done, 1 Error), iptables-rules 0",
	)
	// Tried means tried: the route's error is in its status.
	out, err := a.cli("db", "show", "routes")
	if err != nil || !strings.Contains(out, "nosuch0") || !strings.Contains(out, "Error") {
		t.Fatalf("db show routes: %v\n%s", err, out)
	}
	rest := stopNotified(t, a, sock)
	if rest[0].pid != a.cmd.Process.Pid {
		t.Fatalf("STOPPING=1 from pid %d, want the agent's %d", rest[0].pid, a.cmd.Process.Pid)
	}
}

// A desired file that is bad at start: no READY=1, a STATUS that says
// why and /readyz 503; once the file is good, READY=1.
func TestNotifyNotReadyOnBadFile(t *testing.T) {
	netnstest.RequireRoot(t)
	netnstest.RequireCommand(t, "iptables-restore")
	bin := buildAgent(t)
	desired := filepath.Join(t.TempDir(), "desired.yaml")
	if err := writeFile(t, desired, []byte("routes:\n  - prefix: not-a-prefix\n    type: blackhole\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := listenNotify(t, t.TempDir())
	a := startAgentEnv(t, bin, desired, "", sock.env())
	rejected := "STATUS=desired state in " + desired + " rejected; nothing applied until the file is good: "
	var got []notification
	for len(got) == 0 || !strings.HasPrefix(got[len(got)-1].lines[0], rejected) {
		m, err := sock.next(time.Now().Add(notifyTimeout))
		if err != nil {
			t.Fatalf("waiting for the rejection: %v; received %v", err, got)
		}
		got = append(got, m)
	}
	if len(got) != 2 || got[0].lines[0] != "STATUS=loading the desired state from "+desired || len(got[1].lines) != 1 || !strings.Contains(got[1].lines[0], "not-a-prefix") {
		t.Fatalf("notifications: %v, want loading, then the rejection naming the bad prefix", got)
	}
	// Nothing was applied, and nothing can be until the file changes.
	if err := a.probe("/readyz", 503, "not applied yet"); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(t, desired, []byte("routes:\n  - prefix: 192.0.2.0/24\n    type: blackhole\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got = sock.until(t, "READY=1", notifyTimeout)
	if err := a.probe("/readyz", 200, ""); err != nil {
		t.Fatalf("right after READY=1: %v", err)
	}
	wantNotifications(t, got,
		"STATUS=loaded "+desired+": 1 objects (version 1)",
		"READY=1|STATUS=ready: sysctls 0, routes 1 (1 Done), iptables-rules 0",
	)
}

// An unprivileged agent runs again in a user + network namespace; the
// process systemd started (and watches) is the one whose notifications
// arrive: the child's go through it (notifyRelay), READY=1 once and
// STOPPING=1 on SIGTERM.
func TestNotifyFromSandboxedChild(t *testing.T) {
	netnstest.RequireRoot(t)
	const nobody = 65534
	if out, err := exec.Command("unshare", "--user", "--map-root-user", "--net", "--setuid", "0", "true").CombinedOutput(); err != nil {
		t.Skipf("no unprivileged user namespaces here: %v %s", err, out)
	}
	bin := buildAgent(t)
	// Everything the unprivileged agent reads or writes, in a directory
	// of its own.
	dir, err := os.MkdirTemp("", "agent-notify-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	home := filepath.Join(dir, "home")
	for _, err := range []error{os.Chmod(dir, 0o755), os.Mkdir(home, 0o700), os.Chown(home, nobody, nobody)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	agent := filepath.Join(dir, "agent")
	copyFile(t, bin, agent, 0o755)
	desired := filepath.Join(dir, "desired.yaml")
	if err := os.WriteFile(desired, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := listenNotify(t, dir)
	if err := os.Chmod(sock.path, 0o666); err != nil {
		t.Fatal(err)
	}
	a := &agentProc{t: t, bin: agent, socket: filepath.Join(home, "agent.sock"), out: &syncBuffer{}}
	a.cmd = exec.Command(agent, "run", "--desired", desired, "--socket", a.socket, "--settle-time", "50ms")
	a.cmd.Env = append(os.Environ(), "HOME="+home, "XDG_RUNTIME_DIR="+home, "XDG_STATE_HOME="+home, sock.env()[0])
	a.cmd.Stdout, a.cmd.Stderr = a.out, a.out
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.stop(syscall.SIGTERM) })
	got := sock.until(t, "READY=1", notifyTimeout)
	if err := a.probe("/readyz", 200, ""); err != nil {
		t.Fatalf("right after READY=1: %v", err)
	}
	wantNotifications(t, got,
		"STATUS=loading the desired state from "+desired,
		"STATUS=loaded "+desired+": 0 objects (version 1)",
		"READY=1|STATUS=ready: sysctls 0, routes 0, iptables-rules 0",
	)
	rest := stopNotified(t, a, sock)
	for _, m := range append(got, rest...) {
		if m.pid != a.cmd.Process.Pid {
			t.Fatalf("notification %v not from the process started, %d", m, a.cmd.Process.Pid)
		}
	}
	if !strings.Contains(a.out.String(), "running in a new user + network namespace") {
		t.Fatalf("the agent did not run again in a user namespace:\n%s", a.out.String())
	}
}

func copyFile(t *testing.T, from, to string, perm os.FileMode) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// Fleet mode: READY=1 at the same moment, once every table was listed
// from etcd and every object tried, with /readyz 200 right after it.
func TestNotifyFleet(t *testing.T) {
	netnstest.RequireRoot(t)
	netnstest.RequireCommand(t, "iptables-restore")
	bin := buildAgent(t)
	cluster := etcdtest.StartCluster(t, etcdtest.Binary(t), 1)
	eps := strings.Join(cluster.Endpoints(), ",")
	fleetCLI{t: t, bin: bin, eps: eps}.apply("desired.yaml", "")
	sock := listenNotify(t, t.TempDir())
	a := startFleetAgentEnv(t, bin, eps, "node-0", netnstest.New(t), sock.env())
	got := sock.until(t, "READY=1", notifyTimeout)
	if err := a.probe("/readyz", 200, ""); err != nil {
		t.Fatalf("right after READY=1: %v", err)
	}
	wantNotifications(t, got,
		"STATUS=listing the desired state from etcd",
		"READY=1|STATUS=ready: sysctls 3 (3 Done), routes 4 (4 Done), iptables-rules 4 (4 Done)",
	)
	// Notifying, the agent is healthy (no scope Unknown) all the same.
	waitFor(t, "healthy", a.healthy)
	stopNotified(t, a, sock)
}
