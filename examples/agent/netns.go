package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/steadystate/steadystate/examples/netnsutil"
	"github.com/steadystate/steadystate/hive/cell"
)

const (
	netnsSandbox = "sandbox"
	netnsHost    = "host"
)

// envSandboxed marks the agent re-executed inside its unprivileged sandbox
// (user + network namespace). It has the agent's env prefix, but no flag.
var envSandboxed = envPrefix + "_SANDBOXED"

// Namespace is the network namespace the agent manages, chosen from
// --netns when the hive is built, and made (and removed) by the hive's
// lifecycle:
//
//   - "sandbox" (default): as root, a new named namespace
//     steadystate-agent-PID with lo up, created at start and deleted at
//     stop; otherwise the agent must run itself again in a new user +
//     network namespace (Reexec), so that it never changes the host and
//     needs no privilege. There, its own namespace is the sandbox: lo is
//     brought up at start.
//   - "host": the host's namespace; root only.
//   - NAME: the existing namespace /var/run/netns/NAME, checked at start.
type Namespace struct {
	// Path is what the targets get as their NetNS: "" for the process's
	// own namespace.
	Path string
	// Reexec says that this process must not start the hive but run the
	// agent again in a user + network namespace (see runInUserNS).
	Reexec bool
}

// newNamespace chooses the namespace from cfg and appends the hook that
// makes it.
func newNamespace(cfg AgentConfig, lc cell.Lifecycle, log *slog.Logger) (*Namespace, error) {
	root := os.Geteuid() == 0
	switch mode := cfg.NetNS; {
	case mode == netnsSandbox && os.Getenv(envSandboxed) != "":
		lc.Append(cell.Hook{OnStart: func(context.Context) error {
			log.Info("Working in a private user + network namespace; the host is not changed")
			return loUp()
		}})
		return &Namespace{}, nil
	case mode == netnsSandbox && !root:
		return &Namespace{Reexec: true}, nil
	case mode == netnsSandbox:
		name := sandboxName(os.Getpid())
		var del func() error
		lc.Append(cell.Hook{
			OnStart: func(context.Context) error {
				var err error
				if _, del, err = netnsutil.NewNamed(name); err != nil {
					return fmt.Errorf("--netns sandbox: %w", err)
				}
				log.Info("Working in a private network namespace; the host is not changed", "netns", name)
				return nil
			},
			OnStop: func(context.Context) error {
				if del == nil {
					return nil
				}
				if err := del(); err != nil {
					return fmt.Errorf("removing the sandbox network namespace %s: %w", name, err)
				}
				return nil
			},
		})
		return &Namespace{Path: netnsutil.NamedDir + "/" + name}, nil
	case mode == netnsHost:
		if !root {
			return nil, errors.New("--netns host: managing the host needs root")
		}
		lc.Append(cell.Hook{OnStart: func(context.Context) error {
			log.Warn("Managing the host's network namespace: the desired state is applied to this machine")
			return nil
		}})
		return &Namespace{}, nil
	default:
		ns, err := netnsutil.Resolve(mode)
		if err != nil || mode == "" || ns == "" {
			return nil, fmt.Errorf(`--netns %q: must be "sandbox", "host" or a namespace name`, mode)
		}
		path := string(ns)
		lc.Append(cell.Hook{OnStart: func(context.Context) error {
			if _, err := os.Stat(path); err != nil {
				return fmt.Errorf("--netns %s: no such network namespace (%s): %w", mode, path, err)
			}
			return nil
		}})
		return &Namespace{Path: path}, nil
	}
}

// loUp brings up the loopback device of the current namespace.
func loUp() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return fmt.Errorf("sandbox: bringing lo up: %w", err)
	}
	return nil
}

// runInUserNS runs this program again, with the same arguments, in a new
// user and network namespace where the user is mapped to root, passes
// SIGINT, SIGTERM and SIGHUP on, and returns its exit code. The socket
// and the state directory go along in the environment (the hive reads
// flags from there), because inside, the user is root and their defaults
// would differ. With NOTIFY_SOCKET set, the child's notifications come
// to this process, which sends them on (notifyRelay): systemd watches
// this one.
func runInUserNS(socket, stateDir string, n *notifier) (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 1, err
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), envSandboxed+"=1", envSocket+"="+socket)
	if stateDir != "" {
		cmd.Env = append(cmd.Env, envStateDir+"="+stateDir)
	}
	if n != nil && n.on {
		// A relay that cannot start leaves the child the real socket
		// (enough with NotifyAccess=all), never stops the agent.
		if relay, err := startNotifyRelay(n); err != nil {
			n.log.Warn("Cannot relay the sandboxed agent's notifications; it sends them from its own process", "error", err)
		} else {
			// Closed once the child has exited (runInUserNS returns
			// after its Wait): everything it sent is sent on.
			defer func() {
				if err := relay.Close(); err != nil {
					n.log.Warn("Relaying the sandboxed agent's notifications", "error", err)
				}
			}()
			// The last value of a variable in Env is the one the child
			// gets.
			cmd.Env = append(cmd.Env, envNotifySocket+"="+relay.Path())
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
		// A process group of its own: Ctrl-C at the terminal reaches only
		// this process, which passes it on once (a second signal would
		// kill the child in the middle of its clean stop).
		Setpgid:     true,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 1, fmt.Errorf("starting the agent in a user + network namespace (is unprivileged user namespace creation allowed?): %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case sig := <-sigs:
			cmd.Process.Signal(sig)
		case err := <-done:
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				return exit.ExitCode(), nil
			}
			if err != nil {
				return 1, err
			}
			return 0, nil
		}
	}
}
