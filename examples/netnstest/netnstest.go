// Package netnstest holds the examples' test helpers for network
// namespaces: a throw-away namespace per test, checks that skip (or, in
// CI, fail) a test that needs root or a command, and an exact record of
// what was written to a namespace's routes and nf_tables rules
// (WatchWrites, NFTRules: see writes.go). Only tests import it,
// so the example agent's binary does not link package testing.
package netnstest

import (
	"fmt"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"

	"github.com/steadystate/steadystate/examples/netnsutil"
)

// EnvRequireRoot is the environment variable that, set to "1" (as in CI),
// turns the skips of RequireRoot and RequireCommand into failures: a root
// test must never be skipped silently in CI.
const EnvRequireRoot = "STEADYSTATE_REQUIRE_ROOT_TESTS"

// RequireRoot skips t when not running as root, unless EnvRequireRoot=1,
// where it fails instead.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv(EnvRequireRoot) == "1" {
		t.Fatal("this test needs root, and " + EnvRequireRoot + "=1 forbids skipping it")
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
	if os.Getenv(EnvRequireRoot) == "1" {
		t.Fatalf("this test needs %s, and %s=1 forbids skipping it", name, EnvRequireRoot)
	}
	t.Skipf("skipping: %s is not installed", name)
}

// namespaces numbers the namespaces New creates.
var namespaces atomic.Int64

// New creates a named namespace (loopback up) for the test and deletes it
// when the test ends. It calls RequireRoot first.
func New(t testing.TB) netnsutil.NS {
	t.Helper()
	RequireRoot(t)
	name := fmt.Sprintf("ss-test-%d-%d", os.Getpid(), namespaces.Add(1))
	ns, del, err := netnsutil.NewNamed(name)
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
