package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/steadystate/steadystate/examples/netnstest"
	"github.com/steadystate/steadystate/examples/netnsutil"
)

// The socket scheme: one file name per managed namespace, in one run
// directory; a client finds the socket from --netns as `run` makes it.
func TestSocketScheme(t *testing.T) {
	t.Setenv(envSocket, "")
	t.Setenv(envNetNS, "")
	dir := runDir()
	for _, tc := range []struct{ netns, want string }{
		{"sandbox", "sandbox.sock"},
		{"host", "host.sock"},
		{"blue", "netns-blue.sock"},
		{"/var/run/netns/blue", "netns-_var_run_netns_blue.sock"},
	} {
		if got := socketFor(tc.netns); got != filepath.Join(dir, tc.want) {
			t.Errorf("socketFor(%q) = %s, want %s in %s", tc.netns, got, tc.want, dir)
		}
		if got := (AgentConfig{NetNS: tc.netns}).SocketPath(); got != socketFor(tc.netns) {
			t.Errorf("run --netns %s listens on %s, status looks at %s", tc.netns, got, socketFor(tc.netns))
		}
		if got := clientSocket("", tc.netns); got != socketFor(tc.netns) {
			t.Errorf("clientSocket(--netns %s) = %s", tc.netns, got)
		}
	}
	if got := clientSocket("", ""); got != socketFor(netnsSandbox) {
		t.Errorf("clientSocket default = %s, want the sandbox's", got)
	}
	if got := clientSocket("/x.sock", "blue"); got != "/x.sock" {
		t.Errorf("--socket does not win: %s", got)
	}
	t.Setenv(envNetNS, "blue")
	if got := clientSocket("", ""); got != socketFor("blue") {
		t.Errorf("$%s ignored: %s", envNetNS, got)
	}
	t.Setenv(envSocket, "/env.sock")
	if got := clientSocket("", "host"); got != "/env.sock" {
		t.Errorf("$%s ignored: %s", envSocket, got)
	}
	if os.Geteuid() == 0 && os.Getenv(envSandboxed) == "" && dir != "/run/steadystate-agent" {
		t.Errorf("root's run directory = %s, want /run/steadystate-agent", dir)
	}
}

// deadPid returns the pid of a process that has exited.
func deadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// staleSocketIn leaves a socket file in dir that nothing serves.
func staleSocketIn(t *testing.T, dir, name string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	t.Cleanup(func() { os.Remove(path) })
	return path
}

// TestCleanup: `agent cleanup` lists (--dry-run) and removes the sandbox
// namespace of a dead agent and a socket nothing serves; a live agent's
// socket and namespace stay; an agent sweeps the same at start.
func TestCleanup(t *testing.T) {
	netnstest.RequireRoot(t)
	netnstest.RequireCommand(t, "iptables-restore")
	bin := buildAgent(t)
	dead := sandboxName(deadPid(t))
	if _, _, err := netnsutil.NewNamed(dead); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { netns.DeleteNamed(dead) })
	stale := staleSocketIn(t, runDir(), "netns-cleanup-test.sock")
	deadState := filepath.Join(runDir(), "sandbox-"+strings.TrimPrefix(dead, sandboxPrefix))
	if err := os.MkdirAll(deadState, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(deadState) })

	desired := filepath.Join(t.TempDir(), "desired.yaml")
	if err := writeFile(t, desired, []byte(desiredV1), 0o644); err != nil {
		t.Fatal(err)
	}
	// An agent started with the leftovers in place removes them.
	a := startAgent(t, bin, desired, "")
	waitFor(t, "the agent's start sweep", func() error {
		if _, err := os.Stat(filepath.Join(netnsutil.NamedDir, dead)); err == nil {
			return os.ErrExist
		}
		if _, err := os.Stat(stale); err == nil {
			return os.ErrExist
		}
		if _, err := os.Stat(deadState); err == nil {
			return os.ErrExist
		}
		return nil
	})
	if !strings.Contains(a.out.String(), "Removed a dead agent's leftover") {
		t.Errorf("the sweep was not logged:\n%s", a.out.String())
	}

	// Again, with the command.
	if _, _, err := netnsutil.NewNamed(dead); err != nil {
		t.Fatal(err)
	}
	stale = staleSocketIn(t, runDir(), "netns-cleanup-test.sock")
	out, err := exec.Command(bin, "cleanup", "--dry-run").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "would remove sandbox namespace "+netnsutil.NamedDir+"/"+dead) ||
		!strings.Contains(string(out), "would remove socket "+stale) {
		t.Fatalf("cleanup --dry-run: %v\n%s", err, out)
	}
	if strings.Contains(string(out), sandboxName(a.cmd.Process.Pid)) {
		t.Fatalf("cleanup --dry-run lists a live agent's namespace:\n%s", out)
	}
	if _, err := os.Stat(stale); err != nil {
		t.Fatalf("--dry-run removed %s", stale)
	}
	out, err = exec.Command(bin, "cleanup").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "removed sandbox namespace") || !strings.Contains(string(out), "removed socket "+stale) {
		t.Fatalf("cleanup: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(netnsutil.NamedDir, dead)); err == nil {
		t.Fatalf("cleanup left %s", dead)
	}
	if _, err := os.Stat(string(a.ns)); err != nil {
		t.Fatalf("cleanup removed the live agent's namespace: %v", err)
	}
	if _, err := a.status(); err != nil {
		t.Fatalf("the live agent after cleanup: %v", err)
	}
}

// TestSIGHUPStopsSandbox: in the default sandbox mode SIGHUP (a closed
// terminal) stops the agent cleanly, like SIGTERM.
func TestSIGHUPStopsSandbox(t *testing.T) {
	netnstest.RequireRoot(t)
	netnstest.RequireCommand(t, "iptables-restore")
	bin := buildAgent(t)
	desired := filepath.Join(t.TempDir(), "desired.yaml")
	if err := writeFile(t, desired, []byte(desiredV1), 0o644); err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, bin, desired, "")
	waitFor(t, "everything Done", func() error {
		r, err := a.status()
		if err != nil {
			return err
		}
		return allDone(r, map[string]int{"sysctls": 1, "routes": 2, "iptables-rules": 1})
	})
	if err := a.stop(syscall.SIGHUP); err != nil {
		t.Fatalf("agent exit after SIGHUP: %v", err)
	}
	if _, err := os.Stat(string(a.ns)); !os.IsNotExist(err) {
		t.Fatalf("sandbox namespace %s still exists: %v", a.ns, err)
	}
	if _, err := os.Stat(a.socket); !os.IsNotExist(err) {
		t.Fatalf("socket %s still exists: %v", a.socket, err)
	}
}

// TestNamedNetns: on --netns NAME, SIGHUP reads the desired file again
// (here a symlink whose target changes where no notification reaches and
// the poll is an hour away), and a second agent on the same namespace
// fails before it applies anything.
func TestNamedNetns(t *testing.T) {
	netnstest.RequireRoot(t)
	netnstest.RequireCommand(t, "iptables-restore")
	bin := buildAgent(t)
	ns := netnstest.New(t)
	name := filepath.Base(string(ns))
	real := filepath.Join(t.TempDir(), "real.yaml")
	if err := writeFile(t, real, []byte(desiredV1), 0o644); err != nil {
		t.Fatal(err)
	}
	desired := filepath.Join(t.TempDir(), "desired.yaml")
	if err := os.Symlink(real, desired); err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, bin, desired, ns, "--netns", name, "--reload-interval", "1h")
	waitFor(t, "everything Done", func() error {
		r, err := a.status()
		if err != nil {
			return err
		}
		return allDone(r, map[string]int{"sysctls": 1, "routes": 2, "iptables-rules": 1})
	})

	// A second agent on the same namespace: refused at once.
	second := exec.Command(bin, "run", "--desired", desired, "--netns", name, "--socket", filepath.Join(t.TempDir(), "b.sock"))
	out, err := second.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "another agent is running") || strings.Contains(string(out), "Desired state loaded") {
		t.Fatalf("second agent: %v\n%s", err, out)
	}

	if err := writeFile(t, real, []byte(desiredV2), 0o644); err != nil {
		t.Fatal(err)
	}
	a.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "the file read again after SIGHUP", func() error {
		routes, err := ns.Command("ip", "route", "show")
		if err != nil {
			return err
		}
		if !strings.Contains(string(routes), "blackhole 203.0.113.0/24") {
			return os.ErrNotExist
		}
		return nil
	})
	if _, err := a.status(); err != nil {
		t.Fatalf("the agent after SIGHUP: %v", err)
	}
	if err := a.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("agent exit: %v", err)
	}
}

// A namespace lock held by a process that is not the agent whose pid it
// names (a child of a killed agent between fork and exec) is waited for
// past lockPatience; one held while its agent lives is refused after
// lockPatience.
func TestLockNamespaceOrphanHolder(t *testing.T) {
	flag := fmt.Sprintf("lock-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	path := filepath.Join(runDir(), nsFileName(flag)+".lock")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(path) })
	hold := func(pid int) *os.File {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(strconv.Itoa(pid) + "\n"); err != nil {
			t.Fatal(err)
		}
		return f
	}

	// The agent that wrote the lock lives: refused.
	live := hold(os.Getpid())
	start := time.Now()
	if _, err := lockNamespace(flag); !errors.Is(err, errAgentRunning) {
		t.Fatalf("lock held by a live agent: err %v, want %v", err, errAgentRunning)
	}
	if took := time.Since(start); took < lockPatience {
		t.Errorf("refused after %v, before lockPatience %v", took, lockPatience)
	}
	live.Close()

	// Its agent is gone (a reaped child's pid): the holder is waited for
	// past lockPatience, until it lets go.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	orphan := hold(dead.Process.Pid)
	type result struct {
		release func()
		err     error
	}
	done := make(chan result, 1)
	start = time.Now()
	go func() {
		release, err := lockNamespace(flag)
		done <- result{release, err}
	}()
	// Let go only once lockPatience has passed for the waiter.
	time.Sleep(lockPatience + lockPatience/2)
	orphan.Close()
	r := <-done
	if r.err != nil {
		t.Fatalf("lock let go by an orphan holder after %v: %v", time.Since(start), r.err)
	}
	r.release()
}
