package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steadystate/steadystate/etcd/etcdtest"
	"github.com/steadystate/steadystate/examples/netnstest"
	"github.com/steadystate/steadystate/examples/netnsutil"
)

// After a `fleet apply` that changes one route only (one table, in place),
// `fleet status` says "applied on N of N" within a second of the last
// node's kernel having the route, on Debian's etcd-server 3.4.23 (which
// sends progress notifications only every 10 minutes) as on etcd 3.7.3,
// both real processes, with two agents in namespaces of their own.
// Measured as an operator would: the route polled in each namespace every
// 50ms, `fleet status` run again and again meanwhile.
func TestFleetAppliedWithinASecond(t *testing.T) {
	netnstest.RequireRoot(t)
	netnstest.RequireCommand(t, "iptables-restore")
	bin := buildAgent(t)
	sample, err := os.ReadFile("desired.yaml")
	if err != nil {
		t.Fatal(err)
	}
	servers := []struct {
		name string
		bin  func(testing.TB) string
	}{
		{"Debian etcd-server", debianEtcdServer},
		{"etcd 3.7.3", etcdtest.Binary},
	}
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			cluster := etcdtest.StartCluster(t, srv.bin(t), 1)
			eps := strings.Join(cluster.Endpoints(), ",")
			fleet := fleetCLI{t: t, bin: bin, eps: eps}
			rev := fleet.apply("desired.yaml", "")
			nodes := []string{"node-a", "node-b"}
			var nss []netnsutil.NS
			for _, node := range nodes {
				ns := netnstest.New(t)
				nss = append(nss, ns)
				startFleetAgent(t, bin, eps, node, ns)
			}
			fleet.waitApplied(rev, nodes...)
			for i := range 3 {
				// An operator's pace: a change a second at most. (Faster,
				// a node's status writes wait for its rate limit: 3 at
				// once, then one per 500ms.)
				time.Sleep(time.Second)
				prefix := fmt.Sprintf("100.64.%d.0/24", i)
				file := filepath.Join(t.TempDir(), "one-route.yaml")
				// The sample with one route more: a change of one table.
				text := strings.Replace(string(sample), "routes:\n", "routes:\n  - prefix: "+prefix+"\n    type: prohibit\n", 1)
				if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
				kernel, status, rev := applyAndTime(t, fleet, file, nss, "prohibit "+prefix, len(nodes))
				gap := status.Sub(kernel)
				t.Logf("change %d (revision %d): fleet status said applied %v after the last kernel had the route", i, rev, gap.Round(time.Millisecond))
				if gap > time.Second {
					t.Fatalf("change %d: `fleet status` said applied %v after the last node's kernel had the route; want within 1s", i, gap)
				}
			}
		})
	}
}

// applyAndTime applies file and returns when the last namespace had want
// in its routes and when `fleet status` first said all n nodes applied
// the apply's revision.
func applyAndTime(t *testing.T, fleet fleetCLI, file string, nss []netnsutil.NS, want string, n int) (kernel, status time.Time, rev int64) {
	t.Helper()
	rev = fleet.apply(file, "")
	deadline := time.Now().Add(30 * time.Second)
	var wg sync.WaitGroup
	var kernelErr, statusErr error
	wg.Go(func() {
		seen := make([]bool, len(nss))
		for left := len(nss); left > 0; {
			if time.Now().After(deadline) {
				kernelErr = fmt.Errorf("%q not in every namespace after 30s", want)
				return
			}
			for i, ns := range nss {
				if seen[i] {
					continue
				}
				out, err := ns.Command("ip", "route", "show")
				if err != nil {
					kernelErr = fmt.Errorf("ip route in %s: %v: %s", ns, err, out)
					return
				}
				if strings.Contains(string(out), want) {
					seen[i] = true
					left--
				}
			}
			kernel = time.Now()
			time.Sleep(50 * time.Millisecond)
		}
	})
	wg.Go(func() {
		applied := fmt.Sprintf("applied on %d of %d nodes at revision %d", n, n, rev)
		for {
			if time.Now().After(deadline) {
				statusErr = fmt.Errorf("fleet status never said %q in 30s", applied)
				return
			}
			rep, err := fleet.status()
			if err == nil && rep.Summary == applied {
				status = time.Now()
				// Applied means in the kernel: every namespace has it now.
				for _, ns := range nss {
					if out, err := ns.Command("ip", "route", "show"); err != nil || !strings.Contains(string(out), want) {
						statusErr = fmt.Errorf("fleet status said %q, but %s lacks %q: %v\n%s", applied, ns, want, err, out)
					}
				}
				return
			}
		}
	})
	wg.Wait()
	if err := errors.Join(kernelErr, statusErr); err != nil {
		t.Fatal(err)
	}
	return kernel, status, rev
}

// debianEtcdServer returns Debian's etcd-server binary, or skips the test
// where it is not installed (a failure with STEADYSTATE_REQUIRE_ETCD=1, as
// in CI).
func debianEtcdServer(t testing.TB) string {
	t.Helper()
	const bin = "/usr/bin/etcd"
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("STEADYSTATE_REQUIRE_ETCD") == "1" {
			t.Fatalf("Debian's etcd-server is not installed (%s): %v", bin, err)
		}
		t.Skip("Debian's etcd-server is not installed (apt-get install etcd-server)")
	}
	return bin
}
