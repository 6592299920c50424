package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/steadystate/steadystate/examples/netnstest"
)

// checkDBQueries runs `agent db` queries against an agent that applied
// desiredV1 (two routes of the main table, both Done): get on the
// non-unique status index prints every match, a prefix of a route key
// (its table) lists the table's routes, help shows each index's key
// format with an example, and a malformed key's error shows its index's.
func checkDBQueries(t *testing.T, a *agentProc) {
	t.Helper()
	// Refreshes make a route Refreshing for a moment: ask until both
	// are Done at once.
	waitFor(t, "db get routes status Done: both routes", func() error {
		out, err := a.cli("db", "get", "routes", "status", "Done")
		if err != nil || !strings.Contains(out, "192.0.2.0/24") || !strings.Contains(out, "198.51.100.0/24") {
			return fmt.Errorf("%v\n%s", err, out)
		}
		return nil
	})
	out, err := a.cli("db", "prefix", "routes", "key", "254/")
	if err != nil || !strings.Contains(out, "192.0.2.0/24") || !strings.Contains(out, "198.51.100.0/24") {
		t.Fatalf("db prefix routes key 254/: %v\n%s", err, out)
	}
	out, err = a.cli("db", "prefix", "routes", "key", "100/")
	if err != nil || strings.Contains(out, "192.0.2.0/24") {
		t.Fatalf("db prefix routes key 100/ (no route in table 100): %v\n%s", err, out)
	}
	out, err = a.cli("db", "help")
	for _, want := range []string{
		"name       a sysctl name, e.g. net.ipv4.ip_forward (primary)",
		"key        TABLE/PREFIX/METRIC (a prefix query takes TABLE/ or TABLE/PREFIX/ too), e.g. 254/192.0.2.0/24/0 (primary)",
		"key        TABLE/CHAIN/NAME (a prefix query takes TABLE/CHAIN/ too), e.g. filter/INPUT/allow-ssh (primary)",
		"status     a status: Pending, Refreshing, Done or Error, e.g. Error (non-unique: db get prints every match)",
		"covering   an IP address or prefix, e.g. 192.0.2.1 (longest prefix match: db lpm)",
	} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("db help lacks %q: %v\n%s", want, err, out)
		}
	}
	out, err = a.cli("db", "get", "routes", "key", "192.0.2.0/24")
	if err == nil || !strings.Contains(out, `(keys of index "key": TABLE/PREFIX/METRIC (a prefix query takes TABLE/ or TABLE/PREFIX/ too), e.g. 254/192.0.2.0/24/0)`) {
		t.Errorf("db get routes key 192.0.2.0/24 (no table, no metric): %v\n%s", err, out)
	}
	// The example works.
	out, err = a.cli("db", "get", "routes", "key", "254/192.0.2.0/24/0")
	if err != nil || !strings.Contains(out, "192.0.2.0/24") {
		t.Errorf("db get routes key 254/192.0.2.0/24/0: %v\n%s", err, out)
	}
}

// agent db watch follows the agent across a restart on the same socket:
// it says that the database is a new instance, lists the new agent's
// routes, and shows its changes.
func TestAgentDBWatchAcrossRestart(t *testing.T) {
	netnstest.RequireRoot(t)
	netnstest.RequireCommand(t, "iptables-restore")
	bin := buildAgent(t)
	desired := filepath.Join(t.TempDir(), "desired.yaml")
	if err := writeFile(t, desired, []byte(desiredV1), 0o644); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(t.TempDir(), "agent.sock")
	allApplied := func(a *agentProc) func() error {
		return func() error {
			r, err := a.status()
			if err != nil {
				return err
			}
			return allDone(r, map[string]int{"sysctls": 1, "routes": 2, "iptables-rules": 1})
		}
	}
	first := startAgent(t, bin, desired, "", "--socket", socket)
	first.socket = socket
	waitFor(t, "the first agent applied desiredV1", allApplied(first))

	var out, errOut syncBuffer
	watch := exec.Command(bin, "db", "watch", "routes", "--socket", socket)
	watch.Stdout, watch.Stderr = &out, &errOut
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	watched := make(chan error, 1)
	go func() { watched <- watch.Wait() }()
	t.Cleanup(func() {
		watch.Process.Kill()
		<-watched
	})
	waitFor(t, "the listing", func() error {
		if o := out.String(); !strings.Contains(o, "192.0.2.0/24") || !strings.Contains(o, "198.51.100.0/24") {
			return fmt.Errorf("output:\n%s\nstderr:\n%s", o, errOut.String())
		}
		return nil
	})

	// The agent restarts with another file: 203.0.113.0/24 instead of
	// 198.51.100.0/24.
	if err := first.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("first agent: %v", err)
	}
	if err := writeFile(t, desired, []byte(desiredV2), 0o644); err != nil {
		t.Fatal(err)
	}
	second := startAgent(t, bin, desired, "", "--socket", socket)
	second.socket = socket
	waitFor(t, "the second agent applied desiredV2", allApplied(second))
	const restarted = "a new instance of the program's database"
	waitFor(t, "watch to list the new instance", func() error {
		_, after, found := strings.Cut(out.String(), "203.0.113.0/24")
		if !found || !strings.Contains(errOut.String(), restarted) || !strings.Contains(after, "Done") {
			return fmt.Errorf("output:\n%s\nstderr:\n%s", out.String(), errOut.String())
		}
		return nil
	})

	// A change of the new agent shows: the route that went comes back.
	mark := len(out.String())
	if err := writeFile(t, desired, []byte(desiredV1), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "watch to show the new agent's changes", func() error {
		o := out.String()[mark:]
		if !strings.Contains(o, "+ rev=") || !strings.Contains(o, "198.51.100.0/24") || !strings.Contains(o, `- rev=`) {
			return fmt.Errorf("output since the edit:\n%s\nstderr:\n%s", o, errOut.String())
		}
		return nil
	})
	if n := strings.Count(errOut.String(), restarted); n != 1 {
		t.Errorf("stderr says %d times that the database is new, want once:\n%s", n, errOut.String())
	}

	watch.Process.Signal(syscall.SIGINT)
	select {
	case err := <-watched:
		watched <- err // for the cleanup
		if err != nil {
			t.Fatalf("db watch after SIGINT: %v\nstderr:\n%s", err, errOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("db watch did not exit after SIGINT")
	}
}
