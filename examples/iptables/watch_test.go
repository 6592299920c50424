package iptables

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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

// generation reads the generation of the namespace's ruleset.
func (f *fixture) generation() uint32 {
	f.t.Helper()
	gen, err := generationOf(f.ns)
	if err != nil {
		f.t.Fatal(err)
	}
	return gen
}

func generationOf(ns netnsutil.NS) (uint32, error) {
	file, err := os.Open(string(ns))
	if err != nil {
		return 0, err
	}
	defer file.Close()
	g, err := dialGen(int(file.Fd()))
	if err != nil {
		return 0, err
	}
	defer g.Close()
	return g.generation()
}

// heardAll waits until the watch has handled every generation made so
// far: it makes one of another program's (a chain of the raw table,
// which the target does not report), and waits until the watch read it.
// It returns the watch's counters then. A probe made while a restore of
// the target's runs falls into its quiet window, unheard: after a second
// it probes again.
func (f *fixture) heardAll() WatchStats {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		f.sh("-t", "raw", "-N", "PROBE")
		f.sh("-t", "raw", "-X", "PROBE")
		gen := f.generation()
		for again := time.Now().Add(time.Second); time.Now().Before(again); time.Sleep(5 * time.Millisecond) {
			if s := f.target.WatchStats(); s.Generation >= gen {
				return s
			}
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("the watch never read a probe's generation (the last, %d): %+v\n%s", gen, f.target.WatchStats(), f.save("filter"))
		}
	}
}

// The target's own changes, and changes of what it does not own (foreign
// rules and chains, other tables' and families' rules), are dropped:
// nothing is reported, nothing checked. (Its own restores of one table
// are not even heard: see TestWatchQuietWindow.)
func TestWatchDropsOwnAndForeign(t *testing.T) {
	f := newFixtureWith(t, nil, slowRetries)
	if err := f.write([]*Rule{watchSSH}); err != nil {
		t.Fatal(err)
	}
	before := f.heardAll()
	if err := f.write([]*Rule{watchWeb}); err != nil {
		t.Fatal(err)
	}
	if s := f.heardAll(); s.Reports != before.Reports || s.Quiet != before.Quiet+1 || s.Unsure != 0 {
		t.Fatalf("the target's own change: %+v, want one more quiet restore, nothing reported, nothing unsure (before: %+v)", s, before)
	}
	reports := before.Reports
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

// The target's own restores of several tables are filtered out in the
// kernel (ownfilter.go): their generations reach the watch without their
// changes, and another program's change of the owned chain made
// meanwhile is still repaired.
func TestWatchFiltersOwn(t *testing.T) {
	f := newFixtureWith(t, nil, slowRetries)
	var rules []*Rule
	for i := range 20 {
		rules = append(rules, filterIn(fmt.Sprintf("r%02d", i), i, fmt.Sprintf("-p tcp --dport %d -j ACCEPT", 1000+i)))
	}
	for i := range 5 {
		rules = append(rules, &Rule{Table: "mangle", Chain: "PREROUTING", Name: fmt.Sprintf("m%d", i), Spec: fmt.Sprintf("-p udp --dport %d -j ACCEPT", 2000+i)})
	}
	if err := f.write(rules); err != nil {
		t.Fatal(err)
	}
	s := f.heardAll()
	if s.Own != 2 || s.OwnChanges != 0 || s.Quiet != 0 {
		t.Fatalf("a restore of two tables: %+v, want its 2 generations heard as the target's own, none of their changes, no quiet restore", s)
	}
	if n := f.target.ownFilter.failures(); n != 0 {
		t.Fatalf("%d filter updates failed", n)
	}
	f.sh("-D", "STEADYSTATE-INPUT", "1")
	f.repaired(1)
	if s := f.heardAll(); s.OwnChanges != 0 || s.Unsure != 0 {
		t.Fatalf("the repair's changes reached the watch: %+v", s)
	}
}

// A restore of one table runs with the watch's socket out of nf_tables'
// group (ownfilter.go): nothing of it is heard, and the generation, which
// it moves by one (none when it fails), tells that nothing else happened
// meanwhile. Another program's change made in that window, here by the
// restore command itself (a wrapper that adds a rule to the owned chain
// once it has its input, then runs iptables-restore), moves it by two:
// every object is reported, and the change is repaired.
func TestWatchQuietWindow(t *testing.T) {
	dir := t.TempDir()
	intrude := filepath.Join(dir, "intrude")
	wrapper := filepath.Join(dir, "iptables-restore")
	script := "#!/bin/sh\n" +
		"input=$(cat)\n" +
		"if rm " + intrude + " 2>/dev/null; then iptables -A STEADYSTATE-INPUT -s 192.0.2.9 -j DROP || exit 99; fi\n" +
		"printf '%s\\n' \"$input\" | iptables-restore \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	f := newFixtureWith(t, func(tc *TargetConfig) { tc.RestoreCommand = wrapper }, slowRetries)
	if err := f.write([]*Rule{watchSSH}); err != nil {
		t.Fatal(err)
	}
	s := f.heardAll()
	if s.Quiet != 1 || s.Unsure != 0 || s.Own != 0 {
		t.Fatalf("one restore of one table: %+v, want it quiet, sure, not heard", s)
	}

	// A restore that fails changes nothing: still sure.
	bad := filterIn("bad", 15, "-m nosuchmatch --foo 1 -j ACCEPT")
	if err := f.write([]*Rule{bad}); !errors.Is(err, reconciler.ErrNotAllReconciled) {
		t.Fatalf("a rule iptables rejects: %v, want ErrNotAllReconciled", err)
	}
	if s := f.heardAll(); s.Quiet != 2 || s.Unsure != 0 {
		t.Fatalf("a failed restore: %+v, want 2 quiet restores, none unsure", s)
	}
	if err := f.write(nil, bad); err != nil {
		t.Fatal(err)
	}

	// Another program's change in the window of a restore that fails:
	// the generation moved by one, which is not the restore's.
	if err := os.WriteFile(intrude, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.write([]*Rule{bad}); !errors.Is(err, reconciler.ErrNotAllReconciled) {
		t.Fatalf("a rule iptables rejects: %v, want ErrNotAllReconciled", err)
	}
	if repairs := f.repaired(1); len(repairs) != 1 || !strings.Contains(repairs[0].Changes.String(), "-s 192.0.2.9/32 -j DROP") {
		t.Fatalf("repairs %+v, want the intruder removed", repairs)
	}
	if err := f.write(nil, bad); err != nil {
		t.Fatal(err)
	}
	if s := f.heardAll(); s.Unsure != 1 {
		t.Fatalf("a failed restore with another program's change in its window: %+v, want 1 unsure", s)
	}
	f.expect("filter", "INPUT", "ssh")
	before := f.heardAll()

	// And in the window of a restore that succeeds: it moved by two.
	if err := os.WriteFile(intrude, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.write([]*Rule{watchWeb}); err != nil {
		for obj := range f.table.All(f.db.ReadTxn()) {
			t.Logf("%s: %v", obj.Key(), obj.Status)
		}
		t.Fatal(err)
	}
	if _, err := os.Stat(intrude); !os.IsNotExist(err) {
		t.Fatalf("the wrapper did not intrude: %v", err)
	}
	repairs := f.repaired(2)
	f.expect("filter", "INPUT", "ssh", "web")
	if want := "remove rule filter/STEADYSTATE-INPUT: -s 192.0.2.9/32 -j DROP\n"; len(repairs) != 2 || !strings.Contains(repairs[1].Changes.String(), want) {
		t.Fatalf("repairs %+v, want the intruder removed (%q)", repairs, want)
	}
	if s := f.heardAll(); s.Quiet != before.Quiet+2 || s.Unsure != 2 {
		t.Fatalf("a restore with another program's change in its window: %+v, want 2 more quiet restores (its and the repair's), 2 unsure (before: %+v)", s, before)
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

// Quiet windows opened and closed, again and again, while another program
// commits large transactions that change the owned chain: every
// generation is read by the watch, or counted in a window, or was
// committed before the watch subscribed (again, after an overflow) and
// reported everything; none is neither. (A transaction moves the
// generation before it sends its notifications: a window opened in
// between would lose it, but for its barrier.)
func TestQuietWindowsLoseNothing(t *testing.T) {
	var mu sync.Mutex
	heard := map[uint32]bool{}
	var windows [][2]uint32
	var covered uint32 // every generation up to it was reported by a subscription
	var fixture *fixture
	f := newFixtureWith(t, nil, slowRetries, func(cfg *reconciler.Config[*Rule]) {
		target := cfg.Target.(*Target)
		target.eventBuffer = 256 << 20
		target.heard = func(gen uint32) {
			mu.Lock()
			heard[gen] = true
			mu.Unlock()
		}
		target.ownFilter.closed = func(from, to uint32) {
			mu.Lock()
			windows = append(windows, [2]uint32{from, to})
			mu.Unlock()
		}
		target.subscribed = func() {
			mu.Lock()
			defer mu.Unlock()
			if fixture == nil {
				return
			}
			if gen, err := generationOf(fixture.ns); err == nil {
				covered = max(covered, gen)
			}
		}
	})
	mu.Lock()
	fixture = f
	mu.Unlock()
	if err := f.write([]*Rule{watchSSH}); err != nil {
		t.Fatal(err)
	}
	f.heardAll()
	var big strings.Builder
	big.WriteString("*filter\n:BIG - [0:0]\n-F STEADYSTATE-INPUT\n")
	for i := range 1000 {
		fmt.Fprintf(&big, "-A BIG -s 10.%d.%d.1 -p tcp --dport %d -j DROP\n", i/250, i%250, 1000+i)
	}
	big.WriteString("COMMIT\n")
	start := f.generation()
	done := make(chan error, 1)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if _, err := f.ns.CommandStdin([]byte(big.String()), "iptables-restore", "--noflush"); err != nil {
				done <- err
				return
			}
		}
	}()
	opened := 0
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline) && opened < 1500; {
		// No such process: only its window, unless the target's own
		// restore (a repair) runs.
		if q := f.target.ownFilter.started(1<<30, 1); q != nil {
			opened++
			time.Sleep(200 * time.Microsecond)
			f.target.ownFilter.exited(1<<30, q, false)
		} else {
			f.target.ownFilter.exited(1<<30, nil, false)
		}
		time.Sleep(500 * time.Microsecond)
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	f.heardAll()
	end := f.generation()
	mu.Lock()
	defer mu.Unlock()
	lost := 0
	for gen := start + 1; gen <= end; gen++ {
		counted := slices.ContainsFunc(windows, func(w [2]uint32) bool { return gen > w[0] && gen <= w[1] })
		if !heard[gen] && !counted && gen > covered {
			lost++
		}
	}
	s := f.target.WatchStats()
	t.Logf("generations %d to %d, %d windows (%d of the test's), watch %+v: %d lost", start+1, end, len(windows), opened, s, lost)
	if lost > 0 {
		t.Fatalf("%d of %d generations neither read by the watch, nor counted in a quiet window, nor reported by a subscription", lost, end-start)
	}
	if s.Unsure == 0 {
		t.Fatal("no window met another program's transaction: the test tests nothing")
	}
}
