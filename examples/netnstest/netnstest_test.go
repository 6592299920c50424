package netnstest

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/steadystate/steadystate/examples/netnsutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A namespace from New is isolated: only lo, up, and a sysctl written
// inside is not seen outside.
func TestNewIsolates(t *testing.T) {
	ns := New(t)
	out, err := ns.Command("ip", "-o", "link", "show")
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "lo:") {
		t.Fatalf("links in new namespace = %q, want only lo", out)
	}
	if !strings.Contains(string(out), "UP") {
		t.Fatalf("lo is not up: %q", out)
	}
	const key = "/proc/sys/net/ipv4/ip_forward"
	host, _ := os.ReadFile(key)
	want := "1"
	if strings.TrimSpace(string(host)) == "1" {
		want = "0"
	}
	if err := ns.Do(func() error { return os.WriteFile(key, []byte(want), 0o644) }); err != nil {
		t.Fatal(err)
	}
	var inside []byte
	if err := ns.Do(func() (err error) { inside, err = os.ReadFile(key); return err }); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(key)
	if strings.TrimSpace(string(inside)) != want || string(after) != string(host) {
		t.Fatalf("ip_forward inside=%q host before=%q after=%q", inside, host, after)
	}
}

// Scratch runs its function, and the commands it starts, in a namespace of
// its own that is gone afterwards; the caller's namespace is untouched.
func TestScratch(t *testing.T) {
	RequireRoot(t)
	ns := New(t)
	var inside string
	err := ns.Do(func() error {
		return netnsutil.Scratch(func() error {
			out, err := exec.Command("ip", "-o", "link", "show", "lo").CombinedOutput()
			inside = string(out)
			if err != nil {
				return err
			}
			return exec.Command("ip", "link", "add", "scratch0", "type", "veth", "peer", "name", "scratch1").Run()
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(inside, "UP") {
		t.Fatalf("lo in the scratch namespace is up, so it is not a new one: %q", inside)
	}
	if out, err := ns.Command("ip", "-o", "link", "show"); err != nil || strings.Contains(string(out), "scratch0") {
		t.Fatalf("the scratch namespace's link shows in the caller's: %q %v", out, err)
	}
}

// WatchWrites sees a route and an iptables rule written in the namespace,
// and nothing when nothing is written; NFTRules shows a rule's new handle
// once it is deleted and written again.
func TestWatchWrites(t *testing.T) {
	RequireCommand(t, "iptables")
	ns := New(t)
	if _, err := ns.Command("iptables", "-A", "INPUT", "-j", "ACCEPT"); err != nil {
		t.Fatal(err)
	}
	before := NFTRules(t, ns)
	if len(before) != 1 || before[0].Chain != "INPUT" || !before[0].HasCounter {
		t.Fatalf("NFTRules = %+v, want the one rule of INPUT, with a counter", before)
	}

	w := WatchWrites(t, ns)
	if routes, nft := w.Stop(); len(routes) != 0 || len(nft) != 0 {
		t.Fatalf("nothing written, yet routes %q, nft %q", routes, nft)
	}

	w = WatchWrites(t, ns)
	if _, err := ns.Command("ip", "route", "add", "blackhole", "10.9.0.0/16"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"-D", "INPUT", "1"}, {"-A", "INPUT", "-j", "ACCEPT"}} {
		if _, err := ns.Command("iptables", args...); err != nil {
			t.Fatal(err)
		}
	}
	routes, nft := w.Stop()
	if len(routes) != 1 || !strings.Contains(routes[0], "route add 10.9.0.0/16") {
		t.Errorf("routes = %q, want the add of 10.9.0.0/16", routes)
	}
	if len(nft) == 0 {
		t.Errorf("no nf_tables notification of a rule written again")
	}
	after := NFTRules(t, ns)
	if len(after) != 1 || after[0].Handle == before[0].Handle {
		t.Errorf("NFTRules after the rule was written again = %+v, before %+v: want a new handle", after, before)
	}
}
