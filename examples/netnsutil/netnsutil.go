// Package netnsutil runs code and commands inside a network namespace, and
// creates named namespaces for the example agent's sandbox. It is the
// examples' runtime part and imports no test package; the test helpers
// (throw-away namespaces, root checks) are in package netnstest.
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
	"os/exec"
	"runtime"
	"strings"

	"github.com/vishvananda/netns"
)

// NamedDir is where named network namespaces live (`ip netns add NAME`
// creates NamedDir/NAME).
const NamedDir = "/var/run/netns"

// NS names a network namespace by the path of its file ("" is the current
// namespace of the process, e.g. /var/run/netns/NAME or /proc/PID/ns/net).
type NS string

var (
	// ErrBadRef is wrapped by Resolve's errors.
	ErrBadRef = errors.New("bad network namespace")
	// ErrNoScratch is wrapped by Scratch's error when it cannot create its
	// namespace (without CAP_SYS_ADMIN, say).
	ErrNoScratch = errors.New("cannot create a scratch network namespace")
)

// Resolve turns the NetNS field of an example target's config into an NS:
// "" is the current namespace, a value with a "/" is the path of a
// namespace file (/var/run/netns/x, /proc/PID/ns/net), anything else is
// the name of a namespace under NamedDir. A name that could leave NamedDir
// ("." or "..") or contains a NUL is an error wrapping ErrBadRef. Whether
// the namespace exists is not checked: it may be created later.
func Resolve(ref string) (NS, error) {
	switch {
	case ref == "":
		return "", nil
	case strings.ContainsRune(ref, 0):
		return "", fmt.Errorf("%w %q: contains a NUL byte", ErrBadRef, ref)
	case strings.Contains(ref, "/"):
		return NS(ref), nil
	case ref == "." || ref == "..":
		return "", fmt.Errorf("%w %q: not a namespace name", ErrBadRef, ref)
	}
	return NS(NamedDir + "/" + ref), nil
}

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
	return ns.CommandStdin(nil, name, args...)
}

// CommandStdin is Command with stdin (nil: none).
func (ns NS) CommandStdin(stdin []byte, name string, args ...string) ([]byte, error) {
	var out []byte
	err := ns.Do(func() error {
		cmd := exec.Command(name, args...)
		if stdin != nil {
			cmd.Stdin = bytes.NewReader(stdin)
		}
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
// NamedDir) with its loopback up, and returns it with a function that
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
	ns := NS(NamedDir + "/" + name)
	if _, err := ns.Command("ip", "link", "set", "lo", "up"); err != nil {
		netns.DeleteNamed(name)
		return "", nil, err
	}
	return ns, func() error { return netns.DeleteNamed(name) }, nil
}

// Scratch runs fn in a new, empty network namespace of its own (only lo,
// down), on a thread that no other goroutine ever uses: the thread is
// dropped when fn returns, and with it the namespace. Processes fn starts
// run there. It lets a program try something (such as loading rules to
// see how the kernel shows them) without touching any namespace in use.
// It needs CAP_SYS_ADMIN; without, the error wraps ErrNoScratch and fn is
// not called.
func Scratch(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread exits with this goroutine.
		runtime.LockOSThread()
		h, err := netns.New()
		if err != nil {
			errc <- fmt.Errorf("%w: %w", ErrNoScratch, err)
			return
		}
		h.Close()
		errc <- fn()
	}()
	return <-errc
}
