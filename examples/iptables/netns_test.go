package iptables

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steadystate/steadystate/examples/netnstest"
	"github.com/steadystate/steadystate/examples/netnsutil"
	"github.com/steadystate/steadystate/internal/memtest"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
	"github.com/steadystate/steadystate/statedb"
)

// fixture is a rules table reconciled into a fresh namespace.
type fixture struct {
	t      *testing.T
	ns     netnsutil.NS
	db     *statedb.DB
	table  statedb.RWTable[*Rule]
	target *Target
	r      reconciler.Reconciler[*Rule]
	// known maps the iptables-save line of every rule the test wrote
	// (as it shows in the owned chain of its table) to the rule's name.
	known   map[string]string
	repairs *reconciler.RepairLog
	metrics *countingMetrics
}

// newFixture starts a reconciler of a new rules table into a new
// namespace. The repairs of drift go to the fixture's log.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureWith(t, nil)
}

// newFixtureWith is newFixture with the target's config changed by tc (if
// not nil) and the reconciler's by the edits.
func newFixtureWith(t *testing.T, tcEdit func(*TargetConfig), edits ...func(*reconciler.Config[*Rule])) *fixture {
	t.Helper()
	netnstest.RequireCommand(t, "iptables-restore")
	ns := netnstest.New(t)
	db := statedb.New()
	table, err := NewTable(db)
	if err != nil {
		t.Fatal(err)
	}
	tc := TargetConfig{NetNS: string(ns), Rules: table}
	if tcEdit != nil {
		tcEdit(&tc)
	}
	target, err := NewTarget(tc)
	if err != nil {
		t.Fatal(err)
	}
	repairs := &reconciler.RepairLog{Size: 1000}
	metrics := &countingMetrics{}
	cfg := ReconcilerConfig(table, target)
	cfg.RetryBackoffMin = 10 * time.Millisecond
	cfg.OnRepair = repairs.Add
	cfg.Metrics = metrics
	for _, e := range edits {
		e(&cfg)
	}
	r := reconcilertest.Start(t, db, cfg)
	return &fixture{t: t, ns: ns, db: db, table: table, target: target, r: r, known: map[string]string{}, repairs: repairs, metrics: metrics}
}

// countingMetrics counts what a prune removed and the drift repaired.
type countingMetrics struct {
	reconciler.NopMetrics
	mu            sync.Mutex
	pruned, drift int
}

func (m *countingMetrics) Pruned(_, _ string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pruned += n
}

func (m *countingMetrics) DriftRepaired(_, _ string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.drift += n
}

func (m *countingMetrics) read() (pruned, drift int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pruned, m.drift
}

// noWatch turns the target's drift watch off: for tests that change the
// rules by hand and look at them before a repair.
func noWatch(tc *TargetConfig) { tc.DisableWatch = true }

// learn records how iptables-save shows each rule, found by writing it
// into a scratch chain of its own, so that names can tell the rules of an
// owned chain apart without asking the target.
func (f *fixture) learn(rules []*Rule) {
	f.t.Helper()
	for _, r := range rules {
		args, err := canonicalSpec(r.Spec)
		if err != nil {
			continue
		}
		in := "*" + r.Table + "\n:SCRATCH - [0:0]\n-A SCRATCH " + args + "\nCOMMIT\n"
		if _, err := f.ns.CommandStdin([]byte(in), "iptables-restore", "--noflush"); err != nil {
			continue // iptables rejects it: never in a chain
		}
		out, err := f.ns.Command("iptables", "-t", r.Table, "-S", "SCRATCH")
		if err != nil {
			f.t.Fatal(err)
		}
		f.sh("-t", r.Table, "-F", "SCRATCH")
		f.sh("-t", r.Table, "-X", "SCRATCH")
		for _, l := range strings.Split(string(out), "\n") {
			if rest, ok := strings.CutPrefix(l, "-A SCRATCH"); ok {
				f.known["-A "+DefaultChainPrefix+"-"+r.Chain+rest] = r.Name
			}
		}
	}
}

// write inserts (as Pending) and deletes rules in one transaction and
// waits until the reconciler has attempted them; it returns
// WaitUntilReconciled's error.
func (f *fixture) write(insert []*Rule, del ...*Rule) error {
	f.t.Helper()
	f.learn(insert)
	wtxn := f.db.WriteTxn(f.table)
	for _, r := range insert {
		if _, _, err := f.table.Insert(wtxn, r.Clone().SetStatus(reconciler.StatusPending())); err != nil {
			f.t.Fatal(err)
		}
	}
	for _, r := range del {
		f.table.Delete(wtxn, r)
	}
	rev := f.table.Revision(wtxn.Commit())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := f.r.WaitUntilReconciled(ctx, rev)
	if errors.Is(err, context.DeadlineExceeded) {
		f.t.Fatal(err)
	}
	return err
}

// sh runs iptables in the namespace.
func (f *fixture) sh(args ...string) {
	f.t.Helper()
	if _, err := f.ns.Command("iptables", args...); err != nil {
		f.t.Fatal(err)
	}
}

// save returns iptables-save of one table in the namespace, without its
// comment lines (they hold the time).
func (f *fixture) save(table string) string {
	f.t.Helper()
	out, err := f.ns.Command("iptables-save", "-t", table)
	if err != nil {
		f.t.Fatal(err)
	}
	var b strings.Builder
	for _, l := range strings.SplitAfter(string(out), "\n") {
		if !strings.HasPrefix(l, "#") {
			b.WriteString(l)
		}
	}
	return b.String()
}

// names returns the names of the rules in the owned chain for builtin, in
// order ("" for a rule the test did not write), and the number of hooks
// into it.
func (f *fixture) names(table, builtin string) (names []string, hooks int) {
	f.t.Helper()
	state, err := parseSave([]byte(f.save(table)), DefaultChainPrefix)
	if err != nil {
		f.t.Fatal(err)
	}
	st := state[table]
	owned := DefaultChainPrefix + "-" + builtin
	for _, l := range st.owned[owned] {
		names = append(names, f.known[l])
	}
	return names, st.hooks[hookKey{builtin, owned}]
}

func (f *fixture) expect(table, builtin string, want ...string) {
	f.t.Helper()
	got, hooks := f.names(table, builtin)
	if !slices.Equal(got, want) {
		f.t.Fatalf("%s %s: rules %q, want %q\n%s", table, builtin, got, want, f.save(table))
	}
	if wantHooks := min(len(want), 1); hooks != wantHooks {
		f.t.Fatalf("%s %s: %d hooks, want %d\n%s", table, builtin, hooks, wantHooks, f.save(table))
	}
}

// expectForeign checks that the foreign rules added by addForeign are all
// still there.
func (f *fixture) expectForeign() {
	f.t.Helper()
	out := f.save("filter")
	for _, l := range []string{
		"-A INPUT -p udp -m udp --dport 53 -j ACCEPT",
		"-A INPUT -j FOREIGN",
		"-A FOREIGN -s 192.0.2.1/32 -j DROP",
		":FOREIGN - [0:0]",
	} {
		if !strings.Contains(out, l+"\n") {
			f.t.Fatalf("foreign rule %q is gone:\n%s", l, out)
		}
	}
}

func (f *fixture) addForeign() {
	f.sh("-A", "INPUT", "-p", "udp", "--dport", "53", "-j", "ACCEPT")
	f.sh("-N", "FOREIGN")
	f.sh("-A", "FOREIGN", "-s", "192.0.2.1", "-j", "DROP")
	f.sh("-A", "INPUT", "-j", "FOREIGN")
}

// eventually polls cond until it holds or 30s have passed (generous, for
// a loaded machine under -race); the failure shows the filter table and
// what the optional show functions return.
func (f *fixture) eventually(what string, cond func() bool, show ...func() WatchStats) {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			var extra string
			for _, s := range show {
				extra += fmt.Sprintf("watch: %+v\n", s())
			}
			f.t.Fatalf("timed out waiting until %s\n%s%s", what, extra, f.save("filter"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func filterIn(name string, prio int, spec string) *Rule {
	return &Rule{Table: "filter", Chain: "INPUT", Name: name, Priority: prio, Spec: spec}
}

// TestRulesLifecycle is the story of the target against the real kernel:
// apply rules in order, change them, survive foreign rules, repair drift
// with a full reconciliation, and remove them again.
func TestRulesLifecycle(t *testing.T) {
	f := newFixtureWith(t, noWatch)
	f.addForeign()

	ssh := filterIn("ssh", 10, "-p tcp --dport 22 -j ACCEPT")
	web := filterIn("web", 20, `-p tcp -m multiport --dports 80,443 -j ACCEPT`)
	logd := filterIn("log", 20, `-m limit --limit 1/s -j LOG --log-prefix "dropped: "`)
	drop := filterIn("drop-rest", 100, "-j DROP")
	masq := &Rule{Table: "nat", Chain: "POSTROUTING", Name: "masq", Spec: "-s 10.0.0.0/8 -j MASQUERADE"}
	if err := f.write([]*Rule{drop, web, ssh, logd, masq}); err != nil {
		t.Fatal(err)
	}
	f.expect("filter", "INPUT", "ssh", "log", "web", "drop-rest")
	f.expect("nat", "POSTROUTING", "masq")
	if out := f.save("filter"); !strings.Contains(out, "-A INPUT -m comment --comment \""+HookComment+"\" -j STEADYSTATE-INPUT\n-A INPUT -p udp") {
		t.Fatalf("hook is not the first rule of INPUT:\n%s", out)
	}
	if out := f.save("filter"); !strings.Contains(out, `--log-prefix "dropped: "`) {
		t.Fatalf("quoted argument lost:\n%s", out)
	}
	f.expectForeign()
	for obj := range f.table.All(f.db.ReadTxn()) {
		if obj.Status.Kind != reconciler.StatusKindDone {
			t.Fatalf("%s: status %v", obj.Key(), obj.Status)
		}
	}

	// Change a spec and a priority.
	ssh2 := ssh.Clone()
	ssh2.Spec = "-p tcp --dport 2222 -j ACCEPT"
	web2 := web.Clone()
	web2.Priority = 5
	if err := f.write([]*Rule{ssh2, web2}); err != nil {
		t.Fatal(err)
	}
	f.expect("filter", "INPUT", "web", "ssh", "log", "drop-rest")
	if out := f.save("filter"); !strings.Contains(out, "--dport 2222") || strings.Contains(out, "--dport 22 ") {
		t.Fatalf("ssh rule not changed:\n%s", out)
	}
	f.expectForeign()

	// Drift: delete a rule, add a stray rule to the owned chain, move a
	// rule (same comment, wrong place) and remove the hook. A full
	// reconciliation repairs all of it.
	f.sh("-D", "STEADYSTATE-INPUT", "4") // drop-rest
	f.sh("-I", "STEADYSTATE-INPUT", "1", "-j", "DROP")
	f.sh("-D", "STEADYSTATE-INPUT", "3") // ssh
	f.sh("-A", "STEADYSTATE-INPUT", "-p", "icmp", "-j", "ACCEPT")
	f.sh("-D", "INPUT", "-m", "comment", "--comment", HookComment, "-j", "STEADYSTATE-INPUT")
	if names, hooks := f.names("filter", "INPUT"); !slices.Equal(names, []string{"drop-rest", "web", "log", ""}) || hooks != 0 {
		t.Fatalf("drift not as planned: %q, %d hooks", names, hooks)
	}
	f.r.Prune()
	f.eventually("drift is repaired", func() bool {
		names, hooks := f.names("filter", "INPUT")
		out := f.save("filter")
		return slices.Equal(names, []string{"web", "ssh", "log", "drop-rest"}) && hooks == 1 &&
			strings.Contains(out, "--dport 2222") && !strings.Contains(out, "icmp")
	})
	f.expectForeign()

	// A rule changed in place behind the target's back is repaired too,
	// once the target has read the chain since it wrote the rule (here a
	// prune that finds nothing to do).
	if err := f.target.Prune(context.Background(), nil, f.table.All(f.db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
	f.sh("-R", "STEADYSTATE-INPUT", "2", "-p", "tcp", "--dport", "9999", "-j", "ACCEPT")
	if names, _ := f.names("filter", "INPUT"); !slices.Equal(names, []string{"web", "", "log", "drop-rest"}) {
		t.Fatalf("drift not as planned: %q", names)
	}
	f.r.Prune()
	f.eventually("changed rule is repaired", func() bool {
		names, _ := f.names("filter", "INPUT")
		return slices.Equal(names, []string{"web", "ssh", "log", "drop-rest"}) && !strings.Contains(f.save("filter"), "9999")
	})

	// Delete desired rules: they go; a chain with none left is unhooked
	// and removed, foreign rules stay.
	if err := f.write(nil, logd, web2); err != nil {
		t.Fatal(err)
	}
	f.expect("filter", "INPUT", "ssh", "drop-rest")
	if err := f.write(nil, ssh2, drop, masq); err != nil {
		t.Fatal(err)
	}
	f.expect("filter", "INPUT")
	f.expect("nat", "POSTROUTING")
	if out := f.save("filter"); strings.Contains(out, "STEADYSTATE") {
		t.Fatalf("owned chain or hook left behind:\n%s", out)
	}
	f.expectForeign()
	// A prune with nothing desired leaves foreign rules alone too.
	if err := f.target.Prune(context.Background(), nil, f.table.All(f.db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
	f.expectForeign()
}

// TestBadRuleInBatch: iptables rejects one rule of a round; the others are
// applied and only that one is in Error.
func TestBadRuleInBatch(t *testing.T) {
	f := newFixture(t)
	rules := []*Rule{
		filterIn("a", 1, "-p tcp --dport 1 -j ACCEPT"),
		filterIn("b-bad", 2, "-m nosuchmatch --foo 1 -j ACCEPT"),
		filterIn("c", 3, "-p tcp --dport 3 -j ACCEPT"),
		filterIn("d-bad", 4, "-s 10.0.0.999 -j ACCEPT"),
		filterIn("e", 5, "-p tcp --dport 5 -j ACCEPT"),
	}
	err := f.write(rules)
	if !errors.Is(err, reconciler.ErrNotAllReconciled) {
		t.Fatalf("WaitUntilReconciled = %v, want ErrNotAllReconciled", err)
	}
	f.expect("filter", "INPUT", "a", "c", "e")
	for obj := range f.table.All(f.db.ReadTxn()) {
		bad := strings.HasSuffix(obj.Name, "-bad")
		if bad != (obj.Status.Kind == reconciler.StatusKindError) {
			t.Errorf("%s: status %v", obj.Key(), obj.Status)
		}
	}
	if obj, _, _ := f.table.Get(f.db.ReadTxn(), KeyIndex.Query("filter/INPUT/b-bad")); !strings.Contains(obj.Status.Error, "nosuchmatch") {
		t.Errorf("b-bad: error %q does not say what iptables rejected", obj.Status.Error)
	}
	// Later rounds in the same chain are not held up by the bad rules, and
	// fixing one applies it.
	fixed := filterIn("b-bad", 2, "-p tcp --dport 2 -j ACCEPT")
	if err := f.write([]*Rule{fixed, filterIn("f", 6, "-j RETURN")}); !errors.Is(err, reconciler.ErrNotAllReconciled) {
		t.Fatalf("WaitUntilReconciled = %v, want ErrNotAllReconciled (d-bad)", err)
	}
	f.expect("filter", "INPUT", "a", "b-bad", "c", "e", "f")
}

// TestPruneAfterRestart: a new target, as after a restart with a smaller
// desired state, removes what is no longer desired from its chains and
// leaves foreign rules alone; a target with another prefix leaves both
// alone.
func TestPruneAfterRestart(t *testing.T) {
	// Without the watch: the fixture's reconciler, with the whole desired
	// state, would put back what the restarted target prunes.
	f := newFixtureWith(t, noWatch)
	f.addForeign()
	keep := filterIn("keep", 1, "-j ACCEPT")
	gone := filterIn("gone", 2, "-j DROP")
	out := &Rule{Table: "filter", Chain: "OUTPUT", Name: "out", Spec: "-j ACCEPT"}
	if err := f.write([]*Rule{keep, gone, out}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	desired := func(yield func(*Rule, statedb.Revision) bool) { yield(keep, 1) }

	other, err := NewTarget(TargetConfig{NetNS: string(f.ns), Rules: f.table, ChainPrefix: "OTHER"})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Prune(ctx, nil, desired); err != nil {
		t.Fatal(err)
	}
	f.expect("filter", "INPUT", "keep", "gone")

	restarted, err := NewTarget(TargetConfig{NetNS: string(f.ns), Rules: f.table})
	if err != nil {
		t.Fatal(err)
	}
	if err := restarted.Prune(ctx, nil, desired); err != nil {
		t.Fatal(err)
	}
	f.expect("filter", "INPUT", "keep")
	f.expect("filter", "OUTPUT")
	f.expectForeign()
}

// TestMemoryAfterBurst: 5,000 rules applied and then deleted leave the
// live heap where it was before them: the target keeps no room for the
// rules it no longer has (nor does the rest of the fixture).
func TestMemoryAfterBurst(t *testing.T) {
	f := newFixture(t)
	write := func(insert []*Rule, del []*Rule) {
		t.Helper()
		wtxn := f.db.WriteTxn(f.table)
		for _, r := range insert {
			if _, _, err := f.table.Insert(wtxn, r.Clone().SetStatus(reconciler.StatusPending())); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range del {
			f.table.Delete(wtxn, r)
		}
		rev := f.table.Revision(wtxn.Commit())
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := f.r.WaitUntilReconciled(ctx, rev); err != nil {
			t.Fatal(err)
		}
	}
	one := []*Rule{{Table: "filter", Chain: "INPUT", Name: "one", Spec: "-p udp --dport 9 -j ACCEPT"}}
	write(one, nil)
	base := liveHeap()
	rules := benchRuleSet(5_000)
	write(rules, nil)
	write(nil, rules)
	// One more change: the change iterators move past the deletes.
	write([]*Rule{{Table: "filter", Chain: "INPUT", Name: "two", Spec: "-p udp --dport 10 -j ACCEPT"}}, nil)
	end := liveHeap()
	t.Logf("live heap %d KB before 5,000 rules, %d KB after they were deleted", base>>10, end>>10)
	if grown := int64(end) - int64(base); grown > 256<<10 {
		t.Fatalf("the live heap kept %d KB after 5,000 rules came and went", grown>>10)
	}
}

// liveHeap is memtest.LiveHeap.
var liveHeap = memtest.LiveHeap
