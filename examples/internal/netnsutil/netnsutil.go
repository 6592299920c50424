// Package netnsutil runs code and commands inside a network namespace, and
// creates throw-away namespaces for tests and for the example agent's
// sandbox.
//
// A Linux network namespace belongs to a thread, not a process. Do runs a
// function on a goroutine locked to an OS thread that has entered the
// namespace, and moves that thread back before unlocking it, so no other
// goroutine ever runs in the wrong namespace. Files opened and processes
// started inside Do belong to the namespace: /proc/sys/net, netlink
// sockets, iptables-restore.
package netnsutil

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/vishvananda/netns"
)

// NS names a network namespace by the path of its file ("" is the current
// namespace of the process, e.g. /var/run/netns/NAME or /proc/PID/ns/net).
type NS string

// Do runs fn inside ns. With ns == "" it just calls fn.
func (ns NS) Do(fn func() error) error {
	if ns == "" {
		return fn()
	}
	target, err := netns.GetFromPath(string(ns))
	if err != nil {
		return fmt.Errorf("network namespace %s: %w", ns, err)
	}
	defer target.Close()

	errc := make(chan error, 1)
	// A fresh goroutine, so that if the thread cannot be moved back it is
	// dropped (by exiting while locked) instead of being reused.
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("current network namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(target); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("entering network namespace %s: %w", ns, err)
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			// Leave the thread locked: it exits with this goroutine.
			errc <- errors.Join(ferr, fmt.Errorf("leaving network namespace %s: %w", ns, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Command runs name with args inside ns and returns its combined output.
func (ns NS) Command(name string, args ...string) ([]byte, error) {
	var out []byte
	err := ns.Do(func() error {
		var err error
		out, err = exec.Command(name, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s %v: %w: %s", name, args, err, out)
		}
		return nil
	})
	return out, err
}

// CommandStdin is Command with stdin.
func (ns NS) CommandStdin(stdin []byte, name string, args ...string) ([]byte, error) {
	var out []byte
	err := ns.Do(func() error {
		cmd := exec.Command(name, args...)
		cmd.Stdin = bytes.NewReader(stdin)
		var err error
		out, err = cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s %v: %w: %s", name, args, err, out)
		}
		return nil
	})
	return out, err
}

// NewNamed creates a named network namespace (as `ip netns add` does, under
// /var/run/netns) with its loopback up, and returns it with a function that
// deletes it. It needs root.
func NewNamed(name string) (NS, func() error, error) {
	var handle netns.NsHandle
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		// NewNamed moves the thread into the new namespace.
		handle, err = netns.NewNamed(name)
		if err != nil {
			netns.Set(orig)
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("creating network namespace %q: %w", name, err)
			return
		}
		if err := netns.Set(orig); err != nil {
			errc <- fmt.Errorf("leaving new network namespace %q: %w", name, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- nil
	}()
	if err := <-errc; err != nil {
		return "", nil, err
	}
	handle.Close()
	ns := NS("/var/run/netns/" + name)
	if _, err := ns.Command("ip", "link", "set", "lo", "up"); err != nil {
		netns.DeleteNamed(name)
		return "", nil, err
	}
	return ns, func() error { return netns.DeleteNamed(name) }, nil
}

// RequireRoot skips t when not running as root, unless
// STEADYSTATE_REQUIRE_ROOT_TESTS=1 (as in CI), where it fails instead: a
// root test must never be skipped silently in CI.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("STEADYSTATE_REQUIRE_ROOT_TESTS") == "1" {
		t.Fatal("this test needs root, and STEADYSTATE_REQUIRE_ROOT_TESTS=1 forbids skipping it")
	}
	t.Skip("skipping: this test needs root (it creates network namespaces); run as root to include it")
}

// RequireCommand is like RequireRoot for a command the test needs, such as
// iptables-restore.
func RequireCommand(t testing.TB, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err == nil {
		return
	}
	if os.Getenv("STEADYSTATE_REQUIRE_ROOT_TESTS") == "1" {
		t.Fatalf("this test needs %s, and STEADYSTATE_REQUIRE_ROOT_TESTS=1 forbids skipping it", name)
	}
	t.Skipf("skipping: %s is not installed", name)
}

// testNamespaces numbers the namespaces NewTestNS creates.
var testNamespaces atomic.Int64

// NewTestNS creates a named namespace for the test and deletes it when the
// test ends.
func NewTestNS(t testing.TB) NS {
	t.Helper()
	RequireRoot(t)
	name := fmt.Sprintf("ss-test-%d-%d", os.Getpid(), testNamespaces.Add(1))
	ns, del, err := NewNamed(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := del(); err != nil {
			t.Errorf("deleting network namespace %s: %v", name, err)
		}
	})
	return ns
}
