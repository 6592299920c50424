package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/steadystate/steadystate/examples/netnstest"
)

// The idle cost of the agent: BenchmarkIdleCPU, run by `make bench-idle`
// (it takes minutes, so it is skipped unless -idle.duration is given).
var (
	idleDuration = flag.Duration("idle.duration", 0, "BenchmarkIdleCPU: how long to measure (0: skip the benchmark)")
	idleWarmup   = flag.Duration("idle.warmup", 2*time.Minute, "BenchmarkIdleCPU: how long to wait after the load before measuring")
)

// idleCPULimit is the goal of BenchmarkIdleCPU: at most this percentage
// of one core.
const idleCPULimit = 1.0

// Sizes of BenchmarkIdleCPU's desired state.
const (
	idleRoutes = 10_000
	idleRules  = 2_000
)

// BenchmarkIdleCPU runs the agent binary with its default intervals on a
// desired state of 10,000 routes, 2,000 rules and 3 sysctls, in its
// sandbox, waits until everything is applied and then -idle.warmup (so
// that the window holds the first refresh by age of every object, due 10
// minutes after the load), and measures for -idle.duration (10 minutes in
// `make bench-idle`) the CPU the agent and its children use while nothing
// changes: utime+stime+cutime+cstime of /proc/PID/stat (the children are
// iptables-save and iptables-restore). It reports cpu-% of one core and
// the seconds used; the goal is at most 1%. At the end every object must
// still be Done and no drift repaired.
func BenchmarkIdleCPU(b *testing.B) {
	if *idleDuration <= 0 {
		b.Skip("takes minutes: run with -idle.duration (make bench-idle)")
	}
	netnstest.RequireRoot(b)
	netnstest.RequireCommand(b, "iptables-restore")
	bin := buildAgent(b)
	dir := b.TempDir()
	desired := filepath.Join(dir, "desired.yaml")
	if err := os.WriteFile(desired, idleDesired(), 0o644); err != nil {
		b.Fatal(err)
	}
	socket := filepath.Join(dir, "agent.sock")
	out := &syncBuffer{}
	cmd := exec.Command(bin, "run", "--desired", desired, "--socket", socket)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if b.Failed() {
			b.Logf("agent output:\n%s", out.String())
		}
	}()
	loaded := time.Now()
	if err := idleWaitApplied(socket, 5*time.Minute); err != nil {
		b.Fatal(err)
	}
	b.Logf("applied %d routes, %d rules in %v", idleRoutes, idleRules, time.Since(loaded).Round(time.Millisecond))
	time.Sleep(*idleWarmup)

	hz, err := clockTicks()
	if err != nil {
		b.Fatal(err)
	}
	var used, secs float64
	for b.Loop() {
		before, err := cpuTicks(cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		time.Sleep(*idleDuration)
		after, err := cpuTicks(cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		secs = time.Since(start).Seconds()
		used = float64(after.total()-before.total()) / hz
		b.Logf("over %.0fs: utime %.2fs stime %.2fs cutime %.2fs cstime %.2fs", secs,
			float64(after.utime-before.utime)/hz, float64(after.stime-before.stime)/hz,
			float64(after.cutime-before.cutime)/hz, float64(after.cstime-before.cstime)/hz)
	}
	b.ReportMetric(100*used/secs, "cpu-%")
	b.ReportMetric(used, "cpu-s")
	if pct := 100 * used / secs; pct > idleCPULimit {
		b.Errorf("the idle agent used %.2f%% of one core, more than %v%%", pct, idleCPULimit)
	}

	r, err := fetchStatus(context.Background(), socket)
	if err != nil {
		b.Fatal(err)
	}
	for _, ts := range r.Tables {
		if ts.ByStatus["Done"] != ts.Objects || ts.DriftRepaired != 0 {
			b.Errorf("%s: %d objects, %v, drift repaired %d: want all Done and nothing repaired", ts.Name, ts.Objects, ts.ByStatus, ts.DriftRepaired)
		}
	}
}

// idleDesired is the desired file of BenchmarkIdleCPU.
func idleDesired() []byte {
	var b strings.Builder
	b.WriteString("sysctls:\n")
	for _, s := range []string{"net.ipv4.ip_forward: \"1\"", "net.ipv6.conf.all.forwarding: \"1\"", "net.ipv4.conf.all.rp_filter: \"2\""} {
		name, value, _ := strings.Cut(s, ": ")
		fmt.Fprintf(&b, "  - name: %s\n    value: %s\n", name, value)
	}
	b.WriteString("routes:\n")
	for i := range idleRoutes {
		fmt.Fprintf(&b, "  - prefix: 10.%d.%d.0/24\n    type: blackhole\n", i>>8, i&0xff)
	}
	b.WriteString("rules:\n")
	for i := range idleRules {
		fmt.Fprintf(&b, "  - table: filter\n    chain: INPUT\n    name: rule-%05d\n    priority: %d\n    spec: -s 10.%d.%d.0/24 -p tcp --dport %d -j ACCEPT\n",
			i, i, i>>8, i&0xff, 1000+i)
	}
	return []byte(b.String())
}

// idleWaitApplied waits until the agent at socket has every object of its
// three tables Done.
func idleWaitApplied(socket string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		r, err := fetchStatus(context.Background(), socket)
		if err == nil {
			done := len(r.Tables) == 3
			for _, ts := range r.Tables {
				want := map[string]int{"sysctls": 3, "routes": idleRoutes, "iptables-rules": idleRules}[ts.Name]
				done = done && ts.Objects == want && ts.ByStatus["Done"] == want
			}
			if done {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not applied within %v: %v", timeout, err)
		}
		time.Sleep(time.Second)
	}
}

// procTimes are the CPU times of /proc/PID/stat, in clock ticks.
type procTimes struct{ utime, stime, cutime, cstime int64 }

func (p procTimes) total() int64 { return p.utime + p.stime + p.cutime + p.cstime }

// cpuTicks reads the CPU times of pid and of its children it has waited
// for (fields 14 to 17 of /proc/PID/stat).
func cpuTicks(pid int) (procTimes, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procTimes{}, err
	}
	// The command (field 2) may hold spaces; the fields after it start
	// after its closing parenthesis, with field 3.
	rest := string(data[strings.LastIndexByte(string(data), ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 15 {
		return procTimes{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	var v [4]int64
	for i := range v {
		if v[i], err = strconv.ParseInt(f[11+i], 10, 64); err != nil {
			return procTimes{}, fmt.Errorf("/proc/%d/stat field %d: %w", pid, 14+i, err)
		}
	}
	return procTimes{v[0], v[1], v[2], v[3]}, nil
}

// clockTicks returns the kernel's clock ticks per second (getconf CLK_TCK).
func clockTicks() (float64, error) {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err != nil {
		return 0, fmt.Errorf("getconf CLK_TCK: %w", err)
	}
	return strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
}
