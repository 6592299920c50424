package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/steadystate/steadystate/examples/netnstest"
	"github.com/steadystate/steadystate/examples/netnsutil"
)

// crashSysctls are per-namespace sysctls the crash test changes; each has
// two desired values, neither a fresh namespace's default.
var crashSysctls = []struct{ name, a, b string }{
	{"net.ipv4.ip_default_ttl", "100", "101"},
	{"net.ipv4.icmp_echo_ignore_all", "1", "1"},
	{"net.ipv4.icmp_ratelimit", "500", "600"},
}

// crashDesired is a desired file with the sysctls at version v (0 or 1)
// and n blackhole routes.
func crashDesired(v, n int) string {
	var b strings.Builder
	b.WriteString("sysctls:\n")
	for _, s := range crashSysctls {
		val := s.a
		if v == 1 {
			val = s.b
		}
		fmt.Fprintf(&b, "  - name: %s\n    value: %q\n", s.name, val)
	}
	b.WriteString("routes:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - prefix: 10.%d.%d.0/24\n    type: blackhole\n", i/256, i%256)
	}
	return b.String()
}

func readSysctl(t *testing.T, ns netnsutil.NS, name string) string {
	t.Helper()
	var b []byte
	err := ns.Do(func() (err error) {
		b, err = os.ReadFile("/proc/sys/" + strings.ReplaceAll(name, ".", "/"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestCrashRestart kills the agent with SIGKILL at random moments while it
// starts and applies (every other kill right after the file was loaded),
// 50 times, each time starting it again on the same
// --netns NAME and --state-dir with the file's other version. Then a run
// left alone must bring the kernel to the desired state, and removing the
// objects from the file must restore every sysctl to the value it had
// before the first run: the originals survive every crash in the record.
func TestCrashRestart(t *testing.T) {
	netnstest.RequireRoot(t)
	netnstest.RequireCommand(t, "iptables-restore")
	bin := buildAgent(t)
	ns := netnstest.New(t)
	name := filepath.Base(string(ns))
	state := t.TempDir()
	desired := filepath.Join(t.TempDir(), "desired.yaml")
	originals := map[string]string{}
	for _, s := range crashSysctls {
		originals[s.name] = readSysctl(t, ns, s.name)
		if originals[s.name] == s.a || originals[s.name] == s.b {
			t.Fatalf("%s is %s in a new namespace: pick other test values", s.name, originals[s.name])
		}
	}
	const (
		kills  = 50
		routes = 2000
	)
	rng := rand.New(rand.NewPCG(3, 4))
	start := time.Now()
	var beforeLoad, midApply, afterApply int // where the kills fell
	for i := range kills {
		if err := writeFile(t, desired, []byte(crashDesired(i%2, routes)), 0o644); err != nil {
			t.Fatal(err)
		}
		a := startAgent(t, bin, desired, ns, "--netns", name, "--state-dir", state)
		if i%2 == 0 {
			// Anywhere from the start to well after the apply.
			time.Sleep(time.Duration(rng.Int64N(int64(400 * time.Millisecond))))
		} else {
			// Right after the load: while the reconcilers apply.
			waitUntil(t, "the load", func() bool { return strings.Contains(a.out.String(), "Desired state loaded") })
			time.Sleep(time.Duration(rng.Int64N(int64(15 * time.Millisecond))))
		}
		if err := a.stop(syscall.SIGKILL); err == nil {
			t.Fatalf("kill %d: the agent had exited already:\n%s", i, a.out.String())
		}
		switch out := a.out.String(); {
		case !strings.Contains(out, "Desired state loaded"):
			beforeLoad++
		case !strings.Contains(out, fmt.Sprintf("All %d sysctls reconciled", len(crashSysctls))) ||
			!strings.Contains(out, fmt.Sprintf("All %d routes reconciled", routes)):
			midApply++
		default:
			afterApply++
		}
	}
	t.Logf("%d SIGKILLs in %v: %d before the file was loaded, %d while applying, %d after",
		kills, time.Since(start).Round(time.Millisecond), beforeLoad, midApply, afterApply)
	if midApply == 0 {
		t.Errorf("no kill fell while the agent was applying")
	}

	// Left alone, it converges.
	if err := writeFile(t, desired, []byte(crashDesired(0, routes)), 0o644); err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, bin, desired, ns, "--netns", name, "--state-dir", state)
	waitFor(t, "convergence after the crashes", func() error {
		r, err := a.status()
		if err != nil {
			return err
		}
		return allDone(r, map[string]int{"sysctls": len(crashSysctls), "routes": routes, "iptables-rules": 0})
	})
	for _, s := range crashSysctls {
		if got := readSysctl(t, ns, s.name); got != s.a {
			t.Errorf("%s = %s after convergence, want %s", s.name, got, s.a)
		}
	}
	out, err := ns.Command("ip", "route", "show")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(out), "blackhole 10."); n != routes {
		t.Errorf("%d blackhole routes in the kernel, want %d", n, routes)
	}

	// Everything removed from the file: the originals come back, the
	// routes go.
	if err := writeFile(t, desired, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "originals restored and routes pruned", func() error {
		for _, s := range crashSysctls {
			if got := readSysctl(t, ns, s.name); got != originals[s.name] {
				return fmt.Errorf("%s = %s, want the original %s", s.name, got, originals[s.name])
			}
		}
		out, err := ns.Command("ip", "route", "show")
		if err != nil {
			return err
		}
		if n := strings.Count(string(out), "blackhole 10."); n != 0 {
			return fmt.Errorf("%d routes left", n)
		}
		return nil
	})
	if err := a.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("agent exit: %v", err)
	}
	rec, err := openState(state)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.db.Close()
	if m, err := rec.LoadOriginals(); err != nil || len(m) != 0 {
		t.Errorf("originals still recorded after the restore: %v, %v", m, err)
	}
	if m, err := rec.applied("sysctls"); err != nil || len(m) != 0 {
		t.Errorf("applied/sysctls still holds %d objects after everything was removed: %v", len(m), err)
	}
	// Routes are never recorded (the kernel marks them): no bucket at all.
	if err := rec.view(func(tx *bolt.Tx) error {
		if tx.Bucket(appliedBucket("routes")) != nil {
			t.Errorf("the record has a bucket of routes")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
