package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/steadystate/steadystate/examples/internal/netnsutil"
)

const (
	netnsSandbox = "sandbox"
	netnsHost    = "host"

	// envSandboxed marks the agent re-executed inside its unprivileged
	// sandbox (user + network namespace).
	envSandboxed = "STEADYSTATE_AGENT_SANDBOXED"
	// envSocket passes the socket path into the sandbox, where the user
	// appears as root and the default would differ.
	envSocket = "STEADYSTATE_AGENT_SOCKET"
)

// sandbox is the network namespace the agent manages and how to undo it.
type sandbox struct {
	ns      netnsutil.NS
	cleanup func() error
	// reexec is set when the agent must run again inside an unprivileged
	// user + network namespace instead of continuing here.
	reexec bool
}

// setupNetNS decides, from --netns, which network namespace to manage:
//
//   - "sandbox" (default): as root, a new named namespace
//     steadystate-agent-PID with lo up, deleted at exit; otherwise the
//     agent runs itself again in a new user + network namespace (so it
//     never changes the host, and needs no privilege).
//   - "host": the host's namespace; root only.
//   - NAME: the existing namespace /var/run/netns/NAME.
func setupNetNS(mode string, log *slog.Logger) (*sandbox, error) {
	switch mode {
	case netnsSandbox:
		if os.Getenv(envSandboxed) != "" {
			// Already inside the unprivileged sandbox: it is this process's
			// own namespace.
			if err := loUp(); err != nil {
				return nil, err
			}
			return &sandbox{ns: ""}, nil
		}
		if os.Geteuid() != 0 {
			return &sandbox{reexec: true}, nil
		}
		name := fmt.Sprintf("steadystate-agent-%d", os.Getpid())
		ns, del, err := netnsutil.NewNamed(name)
		if err != nil {
			return nil, fmt.Errorf("--netns sandbox: %w", err)
		}
		log.Info("Working in a private network namespace; the host is not changed", "netns", name)
		return &sandbox{ns: ns, cleanup: del}, nil
	case netnsHost:
		if os.Geteuid() != 0 {
			return nil, errors.New(`--netns host: managing the host needs root`)
		}
		log.Warn("Managing the host's network namespace: the desired state is applied to this machine")
		return &sandbox{ns: ""}, nil
	case "":
		return nil, errors.New(`--netns: must be "sandbox", "host" or a namespace name`)
	default:
		path := "/var/run/netns/" + mode
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("--netns %s: no such network namespace (%s): %w", mode, path, err)
		}
		return &sandbox{ns: netnsutil.NS(path)}, nil
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
// SIGINT/SIGTERM on, and returns its exit code.
func runInUserNS(socket string) (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 1, err
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), envSandboxed+"=1", envSocket+"="+socket)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
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
