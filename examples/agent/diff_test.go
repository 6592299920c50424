package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/steadystate/steadystate/examples/netnstest"
	"github.com/steadystate/steadystate/examples/netnsutil"
	"github.com/steadystate/steadystate/reconciler"
)

// diff runs `agent diff` and returns its standard output and exit code.
func diff(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, append([]string{"diff"}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	if code == 2 || stderr.Len() > 0 {
		t.Logf("agent diff %v: exit %d, stderr:\n%s", args, code, stderr.String())
	}
	return stdout.String(), code
}

// nsState is what a namespace holds that a run changes: its routes, its
// iptables rules and its sysctl ip_forward.
func nsState(t *testing.T, ns netnsutil.NS) string {
	t.Helper()
	var b strings.Builder
	for _, args := range [][]string{{"ip", "route", "show", "table", "all"}, {"ip", "-6", "route", "show", "table", "all"}, {"iptables-save"}} {
		out, err := ns.Command(args[0], args[1:]...)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if !strings.HasPrefix(l, "#") { // iptables-save's dated comments
				b.WriteString(l + "\n")
			}
		}
	}
	if err := ns.Do(func() error {
		v, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
		b.Write(v)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestDiffEndToEnd runs the built `agent diff` against a namespace: on the
// empty namespace it lists what a run adds; after `agent run` applied the
// file it is empty (exit 0); after changes by hand it lists them (exit 1);
// and it never changes the namespace.
func TestDiffEndToEnd(t *testing.T) {
	netnstest.RequireRoot(t)
	netnstest.RequireCommand(t, "iptables-restore")
	bin := buildAgent(t)
	ns := netnstest.New(t)
	name := filepath.Base(string(ns))
	desired := filepath.Join(t.TempDir(), "desired.yaml")
	if err := writeFile(t, desired, []byte(desiredV1), 0o644); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(t.TempDir(), "state")
	args := []string{"--netns", name, "--desired", desired, "--state-dir", stateDir}

	before := nsState(t, ns)
	out, code := diff(t, bin, args...)
	if code != 1 {
		t.Fatalf("diff of the empty namespace: exit %d, want 1\n%s", code, out)
	}
	for _, want := range []string{
		"change  sysctl net.ipv4.ip_forward",
		"add     route 192.0.2.0/24",
		"add     route 198.51.100.0/24 metric 100",
		"add     chain filter/STEADYSTATE-INPUT",
		"add     rule filter/INPUT/allow-ssh",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("diff of the empty namespace lacks %q:\n%s", want, out)
		}
	}
	out, code = diff(t, bin, append(args, "--format", "json")...)
	var plan reconciler.Plan
	if err := json.Unmarshal([]byte(out), &plan); err != nil || code != 1 || len(plan) != 6 {
		t.Fatalf("diff --format json: exit %d, %d changes, %v\n%s", code, len(plan), err, out)
	}
	if after := nsState(t, ns); after != before {
		t.Fatalf("diff changed the namespace:\n%s\nbefore:\n%s", after, before)
	}

	// agent run applies the file in the namespace; then there is nothing
	// to do.
	a := startAgent(t, bin, desired, ns, "--netns", name, "--state-dir", stateDir)
	waitFor(t, "everything Done", func() error {
		r, err := a.status()
		if err != nil {
			return err
		}
		return allDone(r, map[string]int{"sysctls": 1, "routes": 2, "iptables-rules": 1})
	})
	a.cmd.Process.Signal(syscall.SIGTERM)
	if err := a.cmd.Wait(); err != nil {
		t.Fatalf("agent exit: %v", err)
	}
	if out, code := diff(t, bin, args...); code != 0 || out != "" {
		t.Fatalf("diff after the run: exit %d, want 0 and no output\n%s", code, out)
	}

	// Changes by hand show, and diff changes nothing.
	for _, c := range [][]string{
		{"ip", "route", "del", "192.0.2.0/24"},
		{"iptables", "-A", "STEADYSTATE-INPUT", "-p", "icmp", "-j", "ACCEPT"},
		{"iptables", "-A", "INPUT", "-p", "udp", "--dport", "53", "-j", "ACCEPT"}, // foreign
		{"ip", "route", "add", "blackhole", "203.0.113.0/24", "proto", "static"},  // foreign
		{"ip", "route", "add", "blackhole", "203.0.113.99/32", "proto", "254"},    // a leftover of the agent's
		{"sysctl", "-w", "net.ipv4.ip_forward=0"},
	} {
		if out, err := ns.Command(c[0], c[1:]...); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
	}
	before = nsState(t, ns)
	out, code = diff(t, bin, append(args, "--format", "yaml")...)
	plan = nil
	if err := yaml.Unmarshal([]byte(out), &plan); err != nil || code != 1 {
		t.Fatalf("diff after the changes: exit %d, %v\n%s", code, err, out)
	}
	var got []string
	for _, c := range plan {
		got = append(got, c.String())
	}
	want := []string{
		"change sysctl net.ipv4.ip_forward: 0 -> 1",
		"remove route 203.0.113.99/32: blackhole",
		"add route 192.0.2.0/24: blackhole",
		"remove rule filter/STEADYSTATE-INPUT: -p icmp -j ACCEPT",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("diff after the changes:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if after := nsState(t, ns); after != before {
		t.Fatalf("diff changed the namespace:\n%s\nbefore:\n%s", after, before)
	}

	// A sysctl no longer desired: the run that set it recorded its
	// original (0), so diff, reading the record, plans its restoration.
	if out, err := ns.Command("sysctl", "-w", "net.ipv4.ip_forward=1"); err != nil {
		t.Fatalf("sysctl -w: %v\n%s", err, out)
	}
	noSysctls := strings.Replace(desiredV1, "sysctls:\n  - name: net.ipv4.ip_forward\n    value: \"1\"\n", "", 1)
	if err := writeFile(t, desired, []byte(noSysctls), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ = diff(t, bin, args...)
	if !strings.Contains(out, "sysctl net.ipv4.ip_forward") || !strings.Contains(out, "1 -> 0") {
		t.Fatalf("diff with the sysctl no longer desired does not plan its restoration from the record:\n%s", out)
	}

	// Trouble is exit 2: a file that does not load, a bad flag.
	if err := writeFile(t, desired, []byte("routes: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, code := diff(t, bin, args...); code != 2 {
		t.Fatalf("diff of a broken file: exit %d, want 2", code)
	}
	if _, code := diff(t, bin, "--format", "xml"); code != 2 {
		t.Fatalf("diff --format xml: exit %d, want 2", code)
	}
}
