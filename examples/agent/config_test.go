package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/steadystate/steadystate/etcd/fleetcell"
	"github.com/steadystate/steadystate/examples/netnstest"
)

// The documented defaults of `agent run`, and Validate naming the flag at
// fault.
func TestConfig(t *testing.T) {
	def := defaultConfig()
	if def.Desired != "" || def.NetNS != netnsSandbox || def.ReloadInterval != 10*time.Second || def.SettleTime != 500*time.Millisecond ||
		def.PruneInterval != time.Minute || def.RefreshInterval != 10*time.Minute {
		t.Fatalf("defaults %+v", def)
	}
	if def.StateDir != "" || def.Socket != "" {
		t.Fatalf("--state-dir %q, --socket %q: want the per-namespace defaults", def.StateDir, def.Socket)
	}
	for netns, want := range map[string]string{
		"host":    filepath.Join(stateRoot(), "host"),
		"blue":    filepath.Join(stateRoot(), "netns-blue"),
		"sandbox": filepath.Join(runDir(), fmt.Sprintf("sandbox-%d", os.Getpid())),
	} {
		if got := (AgentConfig{NetNS: netns}).StateDirPath(); got != want {
			t.Errorf("--netns %s: state dir %s, want %s", netns, got, want)
		}
	}
	if got := (AgentConfig{NetNS: "host", StateDir: "/x"}).StateDirPath(); got != "/x" {
		t.Errorf("--state-dir /x: %s", got)
	}
	if os.Geteuid() == 0 && os.Getenv(envSandboxed) == "" && stateRoot() != "/var/lib/steadystate/agent" {
		t.Errorf("root's state root %s, want /var/lib/steadystate/agent", stateRoot())
	}
	fdef := fleetcell.DefaultConfig()
	if fdef.EtcdPrefix != "/steadystate/v1" || fdef.StatusTTL != 10*time.Second || len(fdef.EtcdEndpoints) != 0 || fdef.Enabled() {
		t.Fatalf("fleet defaults %+v", fdef)
	}
	if host, _ := os.Hostname(); host != "" && fdef.Node != host {
		t.Errorf("--node defaults to %q, want the hostname %q", fdef.Node, host)
	}
	// Either a file or etcd: the defaults plus one of them validate.
	def.Desired = "desired.yaml"
	if err := errors.Join(def.Validate(), checkMode(def, fdef)); err != nil {
		t.Fatalf("the defaults with --desired do not validate: %v", err)
	}
	fleet := fleetcell.DefaultConfig()
	fleet.EtcdEndpoints = []string{"127.0.0.1:2379"}
	if err := errors.Join(fleet.Validate(), checkMode(defaultConfig(), fleet)); err != nil {
		t.Fatalf("the defaults with --etcd-endpoints do not validate: %v", err)
	}
	if err := checkMode(def, fleet); err == nil || !strings.HasPrefix(err.Error(), "--desired and --etcd-endpoints:") {
		t.Errorf("both: %v", err)
	}
	if err := checkMode(defaultConfig(), fdef); err == nil || !strings.HasPrefix(err.Error(), "--desired FILE or --etcd-endpoints") {
		t.Errorf("neither: %v", err)
	}
	for flag, edit := range map[string]func(*fleetcell.Config){
		"--node":       func(c *fleetcell.Config) { c.Node = "" },
		"--status-ttl": func(c *fleetcell.Config) { c.StatusTTL = time.Second },
	} {
		c := fleet
		edit(&c)
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), flag+":") {
			t.Errorf("%s: Validate = %v, want an error naming the flag", flag, err)
		}
	}
	for flag, edit := range map[string]func(*AgentConfig){
		"--reload-interval":  func(c *AgentConfig) { c.ReloadInterval = 0 },
		"--settle-time":      func(c *AgentConfig) { c.SettleTime = -time.Millisecond },
		"--prune-interval":   func(c *AgentConfig) { c.PruneInterval = -time.Second },
		"--refresh-interval": func(c *AgentConfig) { c.RefreshInterval = 0 },
	} {
		c := defaultConfig()
		c.Desired = "desired.yaml"
		edit(&c)
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), flag+":") {
			t.Errorf("%s: Validate = %v, want an error naming the flag", flag, err)
		}
	}
	slash := fleet
	slash.Node = "a/b"
	// fleetcell's check
	if err := slash.Validate(); err == nil || !strings.HasPrefix(err.Error(), "--node:") {
		t.Errorf("--node a/b: Validate = %v, want an error naming the flag", err)
	}
	if envSocket != "STEADYSTATE_AGENT_SOCKET" || envSandboxed != "STEADYSTATE_AGENT_SANDBOXED" {
		t.Errorf("environment variables %s, %s: want the one prefix STEADYSTATE_AGENT_", envSocket, envSandboxed)
	}
}

// A state directory is one agent's: a second open waits stateOpenTimeout
// and fails naming the directory.
func TestStateDirBusy(t *testing.T) {
	dir := t.TempDir()
	first, err := openState(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer first.db.Close()
	t0 := time.Now()
	_, err = openState(dir)
	if !errors.Is(err, errStateBusy) || !strings.Contains(err.Error(), "--state-dir "+dir) {
		t.Fatalf("second open: %v", err)
	}
	if waited := time.Since(t0); stateOpenTimeout != 2*time.Second || waited < stateOpenTimeout*3/4 {
		t.Fatalf("gave up after %v; want about stateOpenTimeout = %v (documented: 2s)", waited, stateOpenTimeout)
	}
	// The record round-trips originals.
	if err := first.SaveOriginal("net.ipv4.ip_forward", "0"); err != nil {
		t.Fatal(err)
	}
	if m, err := first.LoadOriginals(); err != nil || m["net.ipv4.ip_forward"] != "0" || len(m) != 1 {
		t.Fatalf("LoadOriginals: %v, %v", m, err)
	}
	if err := first.ForgetOriginal("net.ipv4.ip_forward"); err != nil {
		t.Fatal(err)
	}
	if m, _ := first.LoadOriginals(); len(m) != 0 {
		t.Fatalf("after ForgetOriginal: %v", m)
	}
	// Before it is opened, a record fails with errStateNotOpen.
	if _, err := (&stateRecord{dir: dir}).LoadOriginals(); !errors.Is(err, errStateNotOpen) {
		t.Fatalf("unopened record: %v", err)
	}
}

// `agent run` without its desired file: exit 2 with the file named,
// before anything is made (no root needed to see it).
func TestRunRequiresDesiredFile(t *testing.T) {
	bin := buildAgent(t)
	// Neither a file nor etcd: exit 2, naming both.
	out, err := exec.Command(bin, "run", "--socket", filepath.Join(t.TempDir(), "s.sock")).CombinedOutput()
	var code *exec.ExitError
	if !errors.As(err, &code) || code.ExitCode() != exitUsage || !strings.Contains(string(out), "--desired FILE or --etcd-endpoints") {
		t.Fatalf("run without a source: %v\n%s", err, out)
	}
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	cmd := exec.Command(bin, "run", "--desired", missing, "--socket", filepath.Join(t.TempDir(), "s.sock"))
	out, err = cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitUsage || !strings.Contains(string(out), "--desired "+missing) ||
		!strings.Contains(string(out), "required at start") || strings.Contains(string(out), "Starting") {
		t.Fatalf("run without the file: %v\n%s", err, out)
	}
}

// Without iptables, the agent says once what to install.
func TestMissingTools(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if msg := missingTools(); !strings.Contains(msg, "iptables-restore not found") || !strings.Contains(msg, "apt-get install iptables") {
		t.Fatalf("missingTools without iptables: %q", msg)
	}
}

// An agent whose state directory another agent holds applies nothing: the
// record is opened beside the start (see stateRecord), but every target
// waits for it, and the agent stops with the open's error, naming the
// directory. Nothing is written to the kernel meanwhile (the namespace's
// route and nf_tables notifications say so), and systemd is never told
// READY=1.
func TestStateDirBusyAppliesNothing(t *testing.T) {
	netnstest.RequireRoot(t)
	netnstest.RequireCommand(t, "iptables-restore")
	bin := buildAgent(t)
	ns := netnstest.New(t)
	dir := t.TempDir()
	desired := filepath.Join(dir, "desired.yaml")
	if err := os.WriteFile(desired, restartDesired(50, 5), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	holder, err := openState(state)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.db.Close()
	sysctls := func() string {
		var out strings.Builder
		for _, s := range restartSysctls {
			v, err := ns.Command("cat", "/proc/sys/"+strings.ReplaceAll(s.name, ".", "/"))
			if err != nil {
				t.Fatal(err)
			}
			out.Write(v)
		}
		return out.String()
	}
	before := sysctls()
	w := netnstest.WatchWrites(t, ns)
	a := startAgent(t, bin, desired, ns, "--netns", string(ns), "--state-dir", state)
	done := make(chan error, 1)
	go func() { done <- a.cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the agent did not stop within a minute")
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("exit: %v, want a failure", err)
	}
	if out := a.out.String(); !strings.Contains(out, "--state-dir "+state) || !strings.Contains(out, "stayed locked") {
		t.Errorf("the output does not name the busy directory:\n%s", out)
	}
	if routes, nft := w.Stop(); len(routes) > 0 || len(nft) > 0 {
		t.Errorf("the agent wrote to the kernel without its record: routes %q, nf_tables %q", routes, nft)
	}
	if after := sysctls(); after != before {
		t.Errorf("sysctls %q, were %q: written without the record", after, before)
	}
}
