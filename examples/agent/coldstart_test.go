package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/steadystate/steadystate/examples/netnstest"
	"github.com/steadystate/steadystate/examples/netnsutil"
)

// BenchmarkColdStart measures the agent's cold start against the kernel
// tools, in the same run, each in a fresh namespace: the agent started
// with a new state directory on the desired file of restartDesired (the
// sample's sysctls, n routes, m rules), from the start of its process to
// READY=1 on its NOTIFY_SOCKET (then /readyz must be 200, and it must
// come to have every object Done: see restartNode.startMeasured); and
// `ip -batch` of the same routes, then `iptables-restore --noflush` of
// the same rules (a chain, a jump into it, the rules in the agent's
// order), then `sysctl -w` of the sysctls, one after the other as a
// script would. It reports cold-s and tools-s (means), x-tools (the
// median of the per-iteration ratios cold-s / tools-s, each pair run back
// to back under the same load) and vmhwm-MB (the highest peak RSS of a
// cold agent, read once it had every object Done and every table
// pruned). -short runs the small size only.
func BenchmarkColdStart(b *testing.B) {
	netnstest.RequireRoot(b)
	netnstest.RequireCommand(b, "iptables-restore")
	netnstest.RequireCommand(b, "sysctl")
	for _, size := range [][2]int{{10_000, 2_000}, {50_000, 10_000}} {
		b.Run(fmt.Sprintf("routes=%d/rules=%d", size[0], size[1]), func(b *testing.B) {
			if testing.Short() && size[0] > 10_000 {
				b.Skip("-short: the large size only in a full run")
			}
			n, m := size[0], size[1]
			dir := b.TempDir()
			desired := filepath.Join(dir, "desired", "desired.yaml")
			if err := os.MkdirAll(filepath.Dir(desired), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(desired, restartDesired(n, m), 0o644); err != nil {
				b.Fatal(err)
			}
			routesFile := filepath.Join(dir, "routes.batch")
			if err := os.WriteFile(routesFile, toolsRoutes(n), 0o644); err != nil {
				b.Fatal(err)
			}
			rules := toolsRules(m)
			buildAgent(b) // not timed

			var cold, tools time.Duration
			var ratios []float64
			peak := 0
			for b.Loop() {
				c, hwm := coldStartOnce(b, desired, n, m)
				t := toolsOnce(b, routesFile, rules, n, m)
				cold += c
				tools += t
				peak = max(peak, hwm)
				ratios = append(ratios, c.Seconds()/t.Seconds())
			}
			iterations := float64(len(ratios))
			slices.Sort(ratios)
			b.ReportMetric(cold.Seconds()/iterations, "cold-s")
			b.ReportMetric(tools.Seconds()/iterations, "tools-s")
			b.ReportMetric(ratios[len(ratios)/2], "x-tools")
			b.ReportMetric(float64(peak)/1024, "vmhwm-MB")
		})
	}
}

// coldNamespaces numbers the benchmark's namespaces.
var coldNamespaces atomic.Int64

// freshNS makes a namespace (loopback up) that the returned function
// deletes; the namespaces of a large size hold 50,000 routes each, so an
// iteration deletes its own rather than leaving them to the end.
func freshNS(b *testing.B) (netnsutil.NS, func()) {
	b.Helper()
	ns, del, err := netnsutil.NewNamed(fmt.Sprintf("ss-cold-%d-%d", os.Getpid(), coldNamespaces.Add(1)))
	if err != nil {
		b.Fatal(err)
	}
	deleted := false
	remove := func() {
		if !deleted {
			deleted = true
			if err := del(); err != nil {
				b.Error(err)
			}
		}
	}
	b.Cleanup(remove)
	return ns, remove
}

// coldStartOnce starts the agent in a fresh namespace with a new state
// directory and returns the time to Ready and its peak RSS (KiB) once it
// had every object Done; then it stops the agent and deletes the
// namespace (not timed).
func coldStartOnce(b *testing.B, desired string, n, m int) (time.Duration, int) {
	b.StopTimer()
	defer b.StartTimer()
	ns, del := freshNS(b)
	defer del()
	b.StartTimer()
	s := startRestartNode(b, ns, desired, n, m)
	b.StopTimer()
	hwm := vmHWM(b, s.agent.cmd.Process.Pid)
	if err := s.agent.stop(syscall.SIGTERM); err != nil {
		b.Fatalf("agent exit: %v", err)
	}
	return s.cold, hwm
}

// toolsOnce applies the same state with the kernel tools in a fresh
// namespace and returns how long they took; it checks that the routes
// and rules are there (not timed).
func toolsOnce(b *testing.B, routesFile string, rules []byte, n, m int) time.Duration {
	b.StopTimer()
	defer b.StartTimer()
	ns, del := freshNS(b)
	defer del()
	sysctls := []string{"-q", "-w"}
	for _, s := range restartSysctls {
		sysctls = append(sysctls, s.name+"="+s.value)
	}
	start := time.Now()
	if _, err := ns.Command("ip", "-batch", routesFile); err != nil {
		b.Fatal(err)
	}
	if _, err := ns.CommandStdin(rules, "iptables-restore", "--noflush", "--wait"); err != nil {
		b.Fatal(err)
	}
	if _, err := ns.Command("sysctl", sysctls...); err != nil {
		b.Fatal(err)
	}
	took := time.Since(start)
	out, err := ns.Command("ip", "route", "show", "proto", "254")
	if err != nil {
		b.Fatal(err)
	}
	if got := strings.Count(string(out), "\n"); got != n {
		b.Fatalf("ip -batch installed %d routes, want %d", got, n)
	}
	out, err = ns.Command("iptables-save", "-t", "filter")
	if err != nil {
		b.Fatal(err)
	}
	if got := strings.Count(string(out), "-A STEADYSTATE-INPUT "); got != m {
		b.Fatalf("iptables-restore installed %d rules, want %d", got, m)
	}
	return took
}

// toolsRoutes is the `ip -batch` input of restartDesired's routes, as the
// agent installs them (its protocol, 254).
func toolsRoutes(n int) []byte {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "route add blackhole 10.%d.%d.0/24 proto 254\n", i>>8, i&0xff)
	}
	return []byte(b.String())
}

// toolsRules is the iptables-restore input of restartDesired's rules as a
// user would write it: the agent's chain, a plain jump into it, the rules
// in the agent's order (priority, then name).
func toolsRules(m int) []byte {
	var b strings.Builder
	b.WriteString("*filter\n:STEADYSTATE-INPUT - [0:0]\n-I INPUT 1 -j STEADYSTATE-INPUT\n")
	b.WriteString("-A STEADYSTATE-INPUT -i lo -p udp --dport 9 -j ACCEPT\n")
	for i := range m - 1 {
		fmt.Fprintf(&b, "-A STEADYSTATE-INPUT -s 10.%d.%d.0/24 -p tcp --dport %d -j ACCEPT\n", i>>8, i&0xff, 1000+i)
	}
	b.WriteString("COMMIT\n")
	return []byte(b.String())
}
