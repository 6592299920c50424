package netnsutil

import (
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDoIsolatesNamespace(t *testing.T) {
	ns := NewTestNS(t)
	// Inside the namespace only lo exists; the host has more (or at least
	// a different set) of links.
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
	// A sysctl written inside is not seen outside.
	host, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	want := "1"
	if strings.TrimSpace(string(host)) == "1" {
		want = "0"
	}
	err = ns.Do(func() error { return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte(want), 0o644) })
	if err != nil {
		t.Fatal(err)
	}
	var inside []byte
	ns.Do(func() error { inside, err = os.ReadFile("/proc/sys/net/ipv4/ip_forward"); return err })
	after, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if strings.TrimSpace(string(inside)) != want || string(after) != string(host) {
		t.Fatalf("ip_forward inside=%q host before=%q after=%q", inside, host, after)
	}
}
