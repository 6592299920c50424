package iptables

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/steadystate/steadystate/reconciler"
)

// dryRun is the plan of a whole run of tg against the fixture's table, as
// reconciler.DryRun computes it.
func (f *fixture) dryRun(tg *Target) string {
	f.t.Helper()
	p, err := reconciler.DryRun(context.Background(), f.db, f.table.ToTable(), tg)
	if err != nil {
		f.t.Fatal(err)
	}
	return p.String()
}

// Against the kernel, in a namespace: the plan is empty once the rules are
// applied, for the target that wrote them and for a new one (a new
// process); drift made with iptables shows, each change once, and the
// operations then repair it; leftovers of the target's chains are listed,
// foreign rules and chains never; planning changes nothing.
func TestPlanInNamespace(t *testing.T) {
	f := newFixtureWith(t, noWatch)
	f.addForeign()
	ssh := filterIn("ssh", 10, "-p tcp --dport 22 -j ACCEPT")
	web := filterIn("web", 20, "-p tcp -m multiport --dports 80,443 -j ACCEPT")
	drop := filterIn("drop-rest", 100, "-j DROP")
	masq := &Rule{Table: "nat", Chain: "POSTROUTING", Name: "masq", Spec: "-s 10.0.0.0/8 -j MASQUERADE"}
	fresh, err := NewTarget(TargetConfig{NetNS: string(f.ns), Rules: f.table})
	if err != nil {
		t.Fatal(err)
	}

	want := "add chain filter/STEADYSTATE-INPUT\n" +
		"add hook filter/INPUT -> STEADYSTATE-INPUT\n" +
		"add rule filter/INPUT/drop-rest: -j DROP\n" +
		"add rule filter/INPUT/ssh: -p tcp --dport 22 -j ACCEPT\n" +
		"add rule filter/INPUT/web: -p tcp -m multiport --dports 80,443 -j ACCEPT\n" +
		"add chain nat/STEADYSTATE-POSTROUTING\n" +
		"add hook nat/POSTROUTING -> STEADYSTATE-POSTROUTING\n" +
		"add rule nat/POSTROUTING/masq: -s 10.0.0.0/8 -j MASQUERADE\n"
	// The table holds them, not applied yet: written directly, no
	// reconciler round (the fixture's reconciler would apply them).
	wtxn := f.db.WriteTxn(f.table)
	for _, r := range []*Rule{ssh, web, drop, masq} {
		f.table.Insert(wtxn, r.Clone().SetStatus(reconciler.StatusDone()))
	}
	wtxn.Commit()
	if got := f.dryRun(fresh); got != want {
		t.Fatalf("dry run of an empty namespace:\n%s\nwant\n%s", got, want)
	}
	if err := f.write([]*Rule{ssh, web, drop, masq}); err != nil {
		t.Fatal(err)
	}
	if got := f.dryRun(f.target); got != "" {
		t.Fatalf("dry run after the apply:\n%s", got)
	}
	if got := f.dryRun(fresh); got != "" {
		t.Fatalf("dry run of a new target after the apply:\n%s", got)
	}

	// Drift by hand: a rule deleted, one changed in place, a stray, a
	// leftover chain of the target's with a hook, and foreign rules.
	f.sh("-D", "STEADYSTATE-INPUT", "1")                                                 // ssh
	f.sh("-R", "STEADYSTATE-INPUT", "1", "-p", "tcp", "--dport", "8080", "-j", "ACCEPT") // web, changed
	f.sh("-A", "STEADYSTATE-INPUT", "-p", "icmp", "-j", "ACCEPT")
	f.sh("-N", "STEADYSTATE-FORWARD")
	f.sh("-A", "STEADYSTATE-FORWARD", "-j", "ACCEPT")
	f.sh("-I", "FORWARD", "1", "-m", "comment", "--comment", HookComment, "-j", "STEADYSTATE-FORWARD")
	f.sh("-A", "FOREIGN", "-s", "192.0.2.2", "-j", "DROP")
	before := f.save("filter")
	want = "remove rule filter/STEADYSTATE-FORWARD: -j ACCEPT\n" +
		"remove hook filter/FORWARD -> STEADYSTATE-FORWARD\n" +
		"remove chain filter/STEADYSTATE-FORWARD\n" +
		"remove rule filter/STEADYSTATE-INPUT: -p tcp -m tcp --dport 8080 -j ACCEPT\n" +
		"remove rule filter/STEADYSTATE-INPUT: -p icmp -j ACCEPT\n" +
		"add rule filter/INPUT/ssh: -p tcp --dport 22 -j ACCEPT\n" +
		"add rule filter/INPUT/web: -p tcp -m multiport --dports 80,443 -j ACCEPT\n"
	for _, tg := range []*Target{f.target, fresh} {
		if got := f.dryRun(tg); got != want {
			t.Fatalf("dry run after the drift:\n%s\nwant\n%s", got, want)
		}
	}
	if after := f.save("filter"); after != before {
		t.Fatalf("planning changed the rules:\n%s\nbefore:\n%s", after, before)
	}

	// The prune's own plan lists the rules it puts back, so that a
	// reconciler does not skip it as having nothing to do.
	ctx := context.Background()
	txn := f.db.ReadTxn()
	pp, err := fresh.PlanPrune(ctx, txn, f.table.All(txn))
	if err != nil || !strings.Contains(pp.String(), "add rule filter/INPUT/ssh: -p tcp --dport 22 -j ACCEPT\n") {
		t.Fatalf("PlanPrune after a rule was deleted by hand: %v\n%s", err, pp)
	}

	// The operations do what the plans said; then nothing is left to do.
	if err := f.target.Update(ctx, txn, ssh); err != nil {
		t.Fatal(err)
	}
	if err := f.target.Prune(ctx, txn, f.table.All(txn)); err != nil {
		t.Fatal(err)
	}
	for _, tg := range []*Target{f.target, fresh} {
		if got := f.dryRun(tg); got != "" {
			t.Fatalf("dry run after the repair:\n%s\n%s", got, f.save("filter"))
		}
	}
	f.expect("filter", "INPUT", "ssh", "web", "drop-rest")
	f.expect("filter", "FORWARD")
	f.expectForeign()

	// A rule moved by hand is planned as a move, and the Update moves it.
	f.sh("-D", "STEADYSTATE-INPUT", "1")
	f.sh("-A", "STEADYSTATE-INPUT", "-p", "tcp", "--dport", "22", "-j", "ACCEPT")
	if got := f.dryRun(fresh); got != "change rule filter/INPUT/ssh: move to position 1 of STEADYSTATE-INPUT\n" {
		t.Fatalf("dry run after a move:\n%s", got)
	}
	if err := f.target.Update(ctx, txn, ssh); err != nil {
		t.Fatal(err)
	}
	f.expect("filter", "INPUT", "ssh", "web", "drop-rest")
	if got := f.dryRun(fresh); got != "" {
		t.Fatalf("dry run after the move was repaired:\n%s", got)
	}

	// Delete plans: the rule, and with the last rule of a chain the hook
	// and the chain.
	p, err := fresh.PlanDelete(ctx, txn, ssh)
	if err != nil || p.String() != "remove rule filter/INPUT/ssh: -p tcp --dport 22 -j ACCEPT\n" {
		t.Fatalf("PlanDelete(ssh): %q, %v", p, err)
	}
	// Planned against a transaction that deletes masq but is never
	// committed: the fixture's reconciler would otherwise delete the rule
	// from the kernel while the plan reads it.
	wtxn = f.db.WriteTxn(f.table)
	f.table.Delete(wtxn, masq)
	p, err = fresh.PlanDelete(ctx, wtxn, masq)
	wtxn.Abort()
	want = "remove rule nat/POSTROUTING/masq: -s 10.0.0.0/8 -j MASQUERADE\n" +
		"remove hook nat/POSTROUTING -> STEADYSTATE-POSTROUTING\n" +
		"remove chain nat/STEADYSTATE-POSTROUTING\n"
	if err != nil || p.String() != want {
		t.Fatalf("PlanDelete(masq):\n%s%v\nwant\n%s", p, err, want)
	}

	// A rule iptables rejects fails its plan as its Update fails.
	bad := filterIn("bad", 5, "-m nosuchmatch --foo 1 -j ACCEPT")
	if _, err := fresh.PlanUpdate(ctx, txn, bad); err == nil || !reconciler.IsTerminal(err) {
		t.Fatalf("PlanUpdate of a rule iptables rejects: %v, want a terminal error", err)
	}
	if _, err := fresh.PlanUpdate(ctx, nil, ssh); !errors.Is(err, errNoSnapshot) {
		t.Fatalf("PlanUpdate without a snapshot: %v", err)
	}
}

// Without a scratch namespace to learn in, plans identify rules by the
// record, as the operations do: empty for the target that wrote the rules,
// a rewrite for a new target (its first operation rewrites the chain).
func TestPlanWithoutScratch(t *testing.T) {
	f := newFixture(t)
	ssh := filterIn("ssh", 10, "-p tcp --dport 22 -j ACCEPT")
	if err := f.write([]*Rule{ssh}); err != nil {
		t.Fatal(err)
	}
	fresh, err := NewTarget(TargetConfig{NetNS: string(f.ns), Rules: f.table})
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range []*Target{f.target, fresh} {
		tg.mu.Lock()
		tg.noScratch = true
		tg.mu.Unlock()
	}
	if got := f.dryRun(f.target); got != "" {
		t.Fatalf("dry run of the target that wrote the rules:\n%s", got)
	}
	want := "remove rule filter/STEADYSTATE-INPUT: -p tcp -m tcp --dport 22 -j ACCEPT\n" +
		"add rule filter/INPUT/ssh: -p tcp --dport 22 -j ACCEPT\n"
	if got := f.dryRun(fresh); got != want {
		t.Fatalf("dry run of a new target:\n%s\nwant\n%s", got, want)
	}
}

// A batch plan of many rules reads each table once: one iptables-save per
// table, never one per rule.
func TestPlanBatchReadsOncePerTable(t *testing.T) {
	f := newFixtureWith(t, noWatch)
	var rules []*Rule
	for i := range 50 {
		rules = append(rules, filterIn(fmt.Sprintf("r%02d", i), i, fmt.Sprintf("-p tcp --dport %d -j ACCEPT", 1000+i)))
	}
	for i := range 10 {
		rules = append(rules, &Rule{Table: "nat", Chain: "POSTROUTING", Name: fmt.Sprintf("n%d", i), Spec: fmt.Sprintf("-s 10.%d.0.0/16 -j MASQUERADE", i)})
	}
	if err := f.write(rules); err != nil {
		t.Fatal(err)
	}
	f.sh("-D", "STEADYSTATE-INPUT", "7") // r06
	txn := f.db.ReadTxn()
	batch := make([]reconciler.PlanEntry[*Rule], 0, len(rules))
	for r := range f.table.All(txn) {
		batch = append(batch, reconciler.PlanEntry[*Rule]{Object: r})
	}
	saves := f.target.saves.Load()
	f.target.PlanUpdateBatch(context.Background(), txn, batch)
	if got := f.target.saves.Load() - saves; got != 2 {
		t.Errorf("%d iptables-save runs for a batch of %d rules in 2 tables, want 2", got, len(batch))
	}
	var plan reconciler.Plan
	for _, e := range batch {
		if e.Result != nil {
			t.Fatalf("%s: %v", e.Object.Key(), e.Result)
		}
		plan = append(plan, e.Plan...)
	}
	if got := plan.String(); got != "add rule filter/INPUT/r06: -p tcp --dport 1006 -j ACCEPT\n" {
		t.Errorf("batch plan:\n%s", got)
	}
	// Each entry's plan is PlanUpdate's.
	for _, e := range batch {
		p, err := f.target.PlanUpdate(context.Background(), txn, e.Object)
		if err != nil || p.String() != e.Plan.String() {
			t.Errorf("%s: PlanUpdate %q, %v; batch %q", e.Object.Key(), p, err, e.Plan)
		}
	}
}
