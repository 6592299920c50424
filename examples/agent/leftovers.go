package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/steadystate/steadystate/examples/netnsutil"
)

// Files of a running agent, one set per managed namespace, so that agents
// on different namespaces never meet and two on the same one cannot both
// run:
//
//	RUNDIR/<ns>.sock   the status API's socket (--socket overrides it)
//	RUNDIR/<ns>.lock   held (flock) for the agent's lifetime, holds its pid;
//	                   not for a sandbox, which is the agent's own
//	RUNDIR/sandbox-PID a sandbox agent's state directory (see state.go)
//
// where <ns> is "sandbox", "host" or "netns-NAME" (from --netns), and
// RUNDIR is /run/steadystate-agent for root, else
// $XDG_RUNTIME_DIR/steadystate-agent, else /tmp/steadystate-agent-UID.
// `agent status` and the db commands take --netns to find the socket the
// same way. Before it changes anything, an agent takes the lock and checks
// that nothing answers on its socket: a second agent on the same namespace
// or socket fails at once. A sandbox namespace made as root is
// /var/run/netns/steadystate-agent-PID.
//
// An agent killed with SIGKILL leaves its sandbox namespace, its sandbox
// state directory (RUNDIR/sandbox-PID, see state.go) and its socket
// behind. At start an agent removes every sandbox namespace and sandbox
// state directory whose pid is dead and every socket in RUNDIR where
// nothing answers and whose lock is free; `agent cleanup` does the same
// on request. The state of --netns host or NAME is never swept: it is what
// the next agent on that namespace restores from.

// sandboxPrefix starts the name of a root sandbox namespace.
const sandboxPrefix = "steadystate-agent-"

// sandboxName names the root sandbox namespace of the agent with pid.
func sandboxName(pid int) string { return sandboxPrefix + strconv.Itoa(pid) }

// runDir is RUNDIR above. The real user counts: inside the unprivileged
// sandbox the agent runs as a mapped root.
func runDir() string {
	if os.Geteuid() == 0 && os.Getenv(envSandboxed) == "" {
		return "/run/steadystate-agent"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "steadystate-agent")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("steadystate-agent-%d", os.Getuid()))
}

// nsFileName is <ns> above for a --netns value.
func nsFileName(netnsFlag string) string {
	switch netnsFlag {
	case netnsSandbox, netnsHost:
		return netnsFlag
	}
	return "netns-" + strings.ReplaceAll(netnsFlag, "/", "_")
}

// socketFor is the default socket of an agent on --netns netnsFlag.
func socketFor(netnsFlag string) string {
	return filepath.Join(runDir(), nsFileName(netnsFlag)+".sock")
}

// errAgentRunning is the error of an agent that finds another managing the
// same namespace.
var errAgentRunning = errors.New("another agent is running")

// lockPatience is how long lockNamespace tries to take a lock held while
// the agent that wrote its pid into it lives; lockOrphanPatience how long
// once that agent is gone (see there).
const (
	lockPatience       = time.Second
	lockOrphanPatience = 10 * time.Second
)

// lockNamespace takes RUNDIR/<ns>.lock for the life of the process, so
// that a second agent on the same namespace fails before it changes
// anything. The returned function releases it.
func lockNamespace(netnsFlag string) (release func(), err error) {
	path := filepath.Join(runDir(), nsFileName(netnsFlag)+".lock")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("--netns %s: %w", netnsFlag, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--netns %s: %w", netnsFlag, err)
	}
	// An agent killed a moment ago may leave a child between fork and exec,
	// which holds a copy of the lock's descriptor until it execs (on a busy
	// machine, for more than a second): try for a moment before concluding
	// that another agent runs, and for longer while the agent whose pid
	// the lock holds is gone.
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	start := time.Now()
	for errors.Is(err, unix.EWOULDBLOCK) {
		waited := time.Since(start)
		if waited >= lockOrphanPatience || waited >= lockPatience && lockHolderAlive(path) {
			break
		}
		time.Sleep(10 * time.Millisecond)
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	}
	if err != nil {
		pid, _ := os.ReadFile(path)
		f.Close()
		return nil, fmt.Errorf("--netns %s: %w (pid %s holds %s)", netnsFlag, errAgentRunning, strings.TrimSpace(string(pid)), path)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() {
		os.Remove(path)
		f.Close()
	}, nil
}

// lockHolderAlive reports whether the pid written into the lock file at
// path is a live process (or unknown: then it may be).
func lockHolderAlive(path string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return true
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return true
	}
	return pidAlive(pid)
}

// checkSocket fails when an agent answers on socket, before anything is
// applied (the listener itself replaces a stale socket file at start).
func checkSocket(socket string) error {
	if conn, err := net.DialTimeout("unix", socket, time.Second); err == nil {
		conn.Close()
		return fmt.Errorf("--socket %s: %w: it answers there", socket, errAgentRunning)
	}
	return nil
}

// pidAlive reports whether a process with pid exists.
func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// leftover is something a dead agent left behind.
type leftover struct {
	What   string // "sandbox namespace", "socket"
	Path   string
	remove func() error
}

// findLeftovers lists the sandbox namespaces of dead agents (root only:
// others cannot have made any) and the sockets in dir where nothing
// answers and whose lock nobody holds.
func findLeftovers(dir string) ([]leftover, error) {
	var found []leftover
	var errs []error
	if os.Geteuid() == 0 && os.Getenv(envSandboxed) == "" {
		entries, err := os.ReadDir(netnsutil.NamedDir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		for _, e := range entries {
			pid, err := strconv.Atoi(strings.TrimPrefix(e.Name(), sandboxPrefix))
			if !strings.HasPrefix(e.Name(), sandboxPrefix) || err != nil || pid <= 0 || pidAlive(pid) {
				continue
			}
			name := e.Name()
			found = append(found, leftover{What: "sandbox namespace", Path: filepath.Join(netnsutil.NamedDir, name),
				remove: func() error { return netns.DeleteNamed(name) }})
		}
	}
	states, err := filepath.Glob(filepath.Join(dir, sandboxStatePrefix+"*"))
	if err != nil {
		errs = append(errs, err)
	}
	for _, state := range states {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(state), sandboxStatePrefix))
		if err != nil || pid <= 0 || pidAlive(pid) {
			continue
		}
		found = append(found, leftover{What: "sandbox state directory", Path: state,
			remove: func() error { return os.RemoveAll(state) }})
	}
	socks, err := filepath.Glob(filepath.Join(dir, "*.sock"))
	if err != nil {
		errs = append(errs, err)
	}
	for _, sock := range socks {
		if !staleSocket(sock) {
			continue
		}
		found = append(found, leftover{What: "socket", Path: sock, remove: func() error {
			err := os.Remove(sock)
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}})
	}
	return found, errors.Join(errs...)
}

// staleSocket reports whether nothing answers on sock and the lock beside
// it is free (an agent that is starting holds the lock before it listens).
func staleSocket(sock string) bool {
	if conn, err := net.DialTimeout("unix", sock, time.Second); err == nil {
		conn.Close()
		return false
	}
	f, err := os.Open(strings.TrimSuffix(sock, ".sock") + ".lock")
	if err != nil {
		return true
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return false
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return true
}

// sweepLeftovers removes what findLeftovers finds, logging each.
func sweepLeftovers(log *slog.Logger, dir string) error {
	found, err := findLeftovers(dir)
	errs := []error{err}
	for _, l := range found {
		if err := l.remove(); err != nil {
			errs = append(errs, fmt.Errorf("removing %s %s: %w", l.What, l.Path, err))
			continue
		}
		log.Info("Removed a dead agent's leftover", "what", l.What, "path", l.Path)
	}
	return errors.Join(errs...)
}
