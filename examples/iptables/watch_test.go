package iptables

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/steadystate/steadystate/examples/netnstest"
	"github.com/steadystate/steadystate/examples/netnsutil"
	"github.com/steadystate/steadystate/reconciler"
)

// The scenarios of the target's drift watch (watch.go), against the kernel
// of a fresh namespace. Retries are an hour apart and there is no refresh
// by age and no prune: whatever is repaired was reported by the watch.

func slowRetries(cfg *reconciler.Config[*Rule]) {
	cfg.RetryBackoffMin, cfg.RetryBackoffMax = time.Hour, time.Hour
}

// restoreByHand runs iptables-restore --noflush with lines in the
// namespace, as another program would: one nf_tables generation.
func (f *fixture) restoreByHand(restore string, lines ...string) {
	f.t.Helper()
	if _, err := f.ns.CommandStdin([]byte(strings.Join(lines, "\n")+"\n"), restore, "--noflush"); err != nil {
		f.t.Fatal(err)
	}
}

// repaired waits until n drifts were repaired in all and returns the
// repairs, oldest first.
func (f *fixture) repaired(n int) []reconciler.Repair {
	f.t.Helper()
	var got []reconciler.Repair
	f.eventually(fmt.Sprintf("%d drifts repaired", n), func() bool {
		latest, total := f.repairs.Latest()
		got = latest
		return total >= n
	})
	slices.Reverse(got)
	return got
}

var (
	watchSSH  = filterIn("ssh", 10, "-p tcp --dport 22 -j ACCEPT")
	watchWeb  = filterIn("web", 20, "-p tcp -m multiport --dports 80,443 -j ACCEPT")
	watchDrop = filterIn("drop-rest", 100, "-j DROP")
)

// Drift made by another program in one transaction (a desired rule
// deleted, a stray rule added, the hook removed) is reported by nf_tables
// and repaired at once, as one repair of the chain's first rule in key
// order, with all three changes; foreign rules stay.
func TestWatchRepairsDrift(t *testing.T) {
	f := newFixtureWith(t, nil, slowRetries)
	f.addForeign()
	if err := f.write([]*Rule{watchSSH, watchWeb, watchDrop}); err != nil {
		t.Fatal(err)
	}
	f.expect("filter", "INPUT", "ssh", "web", "drop-rest")
	start := time.Now()
	f.restoreByHand("iptables-restore", "*filter",
		"-D STEADYSTATE-INPUT 3",
		"-I STEADYSTATE-INPUT 1 -p icmp -j ACCEPT",
		"-D INPUT -m comment --comment "+HookComment+" -j STEADYSTATE-INPUT",
		"COMMIT")
	repairs := f.repaired(1)
	t.Logf("repaired %v after the change", time.Since(start))
	f.expect("filter", "INPUT", "ssh", "web", "drop-rest")
	f.expectForeign()
	want := "add hook filter/INPUT -> STEADYSTATE-INPUT\n" +
		"remove rule filter/STEADYSTATE-INPUT: -p icmp -j ACCEPT\n" +
		"add rule filter/INPUT/drop-rest: -j DROP\n"
	if len(repairs) != 1 || repairs[0].Changes.String() != want || repairs[0].FoundBy != reconciler.FoundByEvent {
		t.Fatalf("repairs %+v, want one of drop-rest, found by event, with\n%s", repairs, want)
	}
}

// The target's own changes, and changes of what it does not own (foreign
// rules and chains, other tables' and families' rules), are decoded and
// dropped: nothing is reported, nothing checked.
func TestWatchDropsOwnAndForeign(t *testing.T) {
	f := newFixtureWith(t, nil, slowRetries)
	// The first write creates the filter table (the test's learning does,
	// in fact, a program of its own): that is reported.
	if err := f.write([]*Rule{watchSSH}); err != nil {
		t.Fatal(err)
	}
	f.eventually("the target's own change seen", func() bool { return f.target.WatchStats().Own >= 1 }, f.target.WatchStats)
	reports := f.target.WatchStats().Reports
	if err := f.write([]*Rule{watchWeb}); err != nil {
		t.Fatal(err)
	}
	f.eventually("the target's own second change seen", func() bool { return f.target.WatchStats().Own >= 2 }, f.target.WatchStats)
	if s := f.target.WatchStats(); s.Reports != reports {
		t.Fatalf("the target's own changes were reported: %+v", s)
	}
	gens := f.target.WatchStats().Generations
	f.addForeign() // four generations
	f.restoreByHand("ip6tables-restore", "*filter", ":STEADYSTATE-INPUT - [0:0]", "-A STEADYSTATE-INPUT -j DROP", "COMMIT")
	f.restoreByHand("iptables-restore", "*mangle", ":OTHER - [0:0]", "-A PREROUTING -j OTHER", "COMMIT")
	f.eventually("the foreign changes seen", func() bool { return f.target.WatchStats().Generations >= gens+6 })
	if s := f.target.WatchStats(); s.Reports != reports {
		t.Fatalf("foreign changes were reported: %+v", s)
	}
	if _, total := f.repairs.Latest(); total != 0 {
		t.Fatalf("%d repairs", total)
	}
	// And a change of its own chain by another program is.
	f.sh("-A", "STEADYSTATE-INPUT", "-j", "DROP")
	f.repaired(1)
	if s := f.target.WatchStats(); s.Reports != reports+1 {
		t.Fatalf("one change of the owned chain: %+v, want 1 report", s)
	}
	f.expect("filter", "INPUT", "ssh", "web")
}

// A rule put back by a prune is drift repaired (found by the prune), not a
// leftover: pruned counts only what the prune removed.
func TestPruneRestorationIsRepair(t *testing.T) {
	f := newFixtureWith(t, noWatch)
	if err := f.write([]*Rule{watchSSH, watchWeb}); err != nil {
		t.Fatal(err)
	}
	f.sh("-D", "STEADYSTATE-INPUT", "1")                        // ssh
	f.sh("-A", "STEADYSTATE-INPUT", "-p", "icmp", "-j", "DROP") // a leftover
	f.r.Prune()
	repairs := f.repaired(1)
	if len(repairs) != 1 || repairs[0].FoundBy != reconciler.FoundByPrune || repairs[0].Object != "rule filter/INPUT/ssh" {
		t.Fatalf("repairs %+v, want ssh put back by the prune", repairs)
	}
	f.expect("filter", "INPUT", "ssh", "web")
	if pruned, drift := f.metrics.read(); pruned != 1 || drift != 1 {
		t.Fatalf("pruned %d, drift repaired %d; want 1 (the icmp rule) and 1 (ssh)", pruned, drift)
	}
}

// On the legacy backend, which sends no notifications, the watch reads the
// tables every CheckInterval and reports the chains that changed; a check
// with nothing changed reports nothing.
func TestWatchLegacy(t *testing.T) {
	netnstest.RequireCommand(t, "iptables-legacy-restore")
	f := newFixtureWith(t, func(tc *TargetConfig) {
		tc.RestoreCommand, tc.SaveCommand = "iptables-legacy-restore", "iptables-legacy-save"
		tc.CheckInterval = 50 * time.Millisecond
	}, slowRetries)
	if err := f.write([]*Rule{watchSSH, watchWeb}); err != nil {
		t.Fatal(err)
	}
	checks := f.target.WatchStats().Checks
	f.eventually("two checks", func() bool { return f.target.WatchStats().Checks >= checks+2 })
	reports := f.target.WatchStats().Reports
	f.eventually("two more checks", func() bool { return f.target.WatchStats().Checks >= checks+4 })
	if s := f.target.WatchStats(); s.Reports != reports || s.Generations != 0 {
		t.Fatalf("checks with nothing changed reported something: %+v", s)
	}
	if _, err := f.ns.Command("iptables-legacy", "-D", "STEADYSTATE-INPUT", "1"); err != nil {
		t.Fatal(err)
	}
	repairs := f.repaired(1)
	if repairs[0].Object != "filter/INPUT/ssh: -p tcp --dport 22 -j ACCEPT" || repairs[0].FoundBy != reconciler.FoundByEvent {
		t.Fatalf("repairs %+v", repairs)
	}
	out, err := f.ns.Command("iptables-legacy-save", "-t", "filter")
	if err != nil || !strings.Contains(string(out), "--dport 22") {
		t.Fatalf("ssh not put back: %v\n%s", err, out)
	}
	s := f.target.WatchStats()
	t.Logf("legacy checks: %d in %v, %v each", s.Checks, s.CheckTime, s.CheckTime/time.Duration(s.Checks))
}

// When notifications are lost (a tiny buffer and a big transaction), the
// watch subscribes again and has every object checked: the rule deleted in
// that transaction is put back. (Whether a transaction overflows the
// buffer depends on how fast the watch reads: the test tries until one
// does.)
func TestWatchOverflow(t *testing.T) {
	f := newFixtureWith(t, nil, slowRetries, func(cfg *reconciler.Config[*Rule]) {
		cfg.Target.(*Target).eventBuffer = 1 // the kernel makes it its minimum
	})
	if err := f.write([]*Rule{watchSSH, watchWeb}); err != nil {
		t.Fatal(err)
	}
	for attempt := range 10 {
		overflows := f.target.WatchStats().Overflows
		_, repaired := f.repairs.Latest()
		lines := []string{"*filter", fmt.Sprintf(":FLOOD%d - [0:0]", attempt)}
		for i := range 2000 {
			lines = append(lines, fmt.Sprintf("-A FLOOD%d -s 10.9.%d.%d -j DROP", attempt, i/256, i%256))
		}
		lines = append(lines, "-D STEADYSTATE-INPUT 1", "COMMIT")
		f.restoreByHand("iptables-restore", lines...)
		f.repaired(repaired + 1)
		f.expect("filter", "INPUT", "ssh", "web")
		if s := f.target.WatchStats(); s.Overflows > overflows {
			t.Logf("attempt %d overflowed: %+v", attempt, s)
			return
		}
	}
	t.Fatalf("no overflow in 10 transactions of 2000 rules with a tiny buffer: the test tests nothing (%+v)", f.target.WatchStats())
}

// When the namespace goes away the watch fails, naming it, and every rule
// says it is gone; once it is back the rules are applied there again.
func TestWatchNamespaceGone(t *testing.T) {
	f := newFixture(t)
	if err := f.write([]*Rule{watchSSH}); err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(string(f.ns))
	if out, err := netnsutil.NS("").Command("ip", "netns", "del", name); err != nil {
		t.Fatalf("ip netns del: %v %s", err, out)
	}
	f.eventually("the rule's status says the namespace is gone", func() bool {
		obj, _, _ := f.table.Get(f.db.ReadTxn(), KeyIndex.Query(watchSSH.Key()))
		return obj.Status.Kind == reconciler.StatusKindError && strings.Contains(obj.Status.Error, string(f.ns))
	})
	if _, _, err := netnsutil.NewNamed(name); err != nil { // the test's cleanup deletes it
		t.Fatal(err)
	}
	f.eventually("the rule applied in the new namespace", func() bool {
		out, err := f.ns.Command("iptables-save", "-t", "filter")
		return err == nil && strings.Contains(string(out), "--dport 22")
	})
}

// The target's own restores are filtered out in the kernel (ownfilter.go):
// their generations reach the watch without their changes, and another
// program's change of the owned chain made meanwhile is still repaired.
func TestWatchFiltersOwn(t *testing.T) {
	f := newFixtureWith(t, nil, slowRetries)
	rules := make([]*Rule, 20)
	for i := range rules {
		rules[i] = filterIn(fmt.Sprintf("r%02d", i), i, fmt.Sprintf("-p tcp --dport %d -j ACCEPT", 1000+i))
	}
	if err := f.write(rules); err != nil {
		t.Fatal(err)
	}
	f.eventually("the target's own change seen", func() bool { return f.target.WatchStats().Own >= 1 }, f.target.WatchStats)
	if s := f.target.WatchStats(); s.OwnChanges != 0 {
		t.Fatalf("%d changes of the target's own generations reached the watch, want 0 (filtered): %+v", s.OwnChanges, s)
	}
	if n := f.target.ownFilter.failures(); n != 0 {
		t.Fatalf("%d filter updates failed", n)
	}
	f.sh("-D", "STEADYSTATE-INPUT", "1")
	f.repaired(1)
	if s := f.target.WatchStats(); s.OwnChanges != 0 {
		t.Fatalf("the repair's changes reached the watch: %+v", s)
	}
}

// backendOf knows the backend of a command that resolves, through any
// links, to one of iptables' two multi-call binaries, and nothing else:
// the target asks --version then.
func TestBackendOf(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"xtables-nft-multi", "xtables-legacy-multi", "xtables-multi", "iptables-wrapper"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := func(name, to string) string {
		p := filepath.Join(dir, name)
		if err := os.Symlink(to, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Debian's: iptables-save -> alternatives -> iptables-nft-save -> the binary.
	nftSave := link("iptables-nft-save", "xtables-nft-multi")
	alt := link("alternatives-iptables-save", nftSave)
	for _, c := range []struct {
		cmd        string
		nft, known bool
	}{
		{link("iptables-save", alt), true, true},
		{link("iptables-legacy-save", filepath.Join(dir, "xtables-legacy-multi")), false, true},
		{link("iptables-old-save", "xtables-multi"), false, false},
		{filepath.Join(dir, "iptables-wrapper"), false, false},
		{filepath.Join(dir, "missing-save"), false, false},
		{link("dangling-save", "nowhere"), false, false},
	} {
		if nft, known := backendOf(c.cmd); nft != c.nft || known != c.known {
			t.Errorf("backendOf(%s) = %v, %v; want %v, %v", filepath.Base(c.cmd), nft, known, c.nft, c.known)
		}
	}
	// The machine's own, when it has iptables 1.8.
	if path, err := exec.LookPath("iptables-save"); err == nil {
		if out, err := exec.Command(path, "--version").Output(); err == nil {
			if nft, known := backendOf("iptables-save"); known && nft != strings.Contains(string(out), "nf_tables") {
				t.Errorf("backendOf(iptables-save) says nf_tables %v; its --version says %q", nft, out)
			}
		}
	}
}
