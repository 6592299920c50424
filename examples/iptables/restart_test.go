package iptables

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/steadystate/steadystate/examples/netnstest"
	"github.com/steadystate/steadystate/reconciler"
)

// restartRules are the rules of the restart tests: many in filter's
// INPUT (the first counts the packets of sendPackets), a few in OUTPUT
// and in nat.
func restartRules() []*Rule {
	rules := []*Rule{filterIn("discard", 0, "-i lo -p udp --dport 9 -j ACCEPT")}
	for i := range 60 {
		rules = append(rules, filterIn(fmt.Sprintf("r%03d", i), 1, fmt.Sprintf("-s 10.1.%d.0/24 -p tcp --dport %d -j ACCEPT", i, 1000+i)))
	}
	rules = append(rules,
		&Rule{Table: "filter", Chain: "OUTPUT", Name: "out", Spec: "-p udp --dport 53 -j ACCEPT"},
		&Rule{Table: "nat", Chain: "POSTROUTING", Name: "masq", Spec: "-s 10.0.0.0/8 -o lo -j MASQUERADE"})
	return rules
}

// sendPackets sends a few UDP packets to port 9 of 127.0.0.1 in the
// namespace, which the rule "discard" counts.
func (f *fixture) sendPackets() {
	f.t.Helper()
	netnstest.SendUDP(f.t, f.ns, 9, 3)
}

// updateAll runs target's UpdateBatch over every rule of f's table, as a
// reconciler's first round does, and fails on any error.
func (f *fixture) updateAll(target *Target) {
	f.t.Helper()
	txn := f.db.ReadTxn()
	var batch []reconciler.BatchEntry[*Rule]
	for r := range f.table.All(txn) {
		batch = append(batch, reconciler.BatchEntry[*Rule]{Object: r})
	}
	target.UpdateBatch(context.Background(), txn, batch)
	for _, e := range batch {
		if e.Result != nil {
			f.t.Fatalf("%s: %v", e.Object.Key(), e.Result)
		}
	}
}

// A target that starts over chains already as desired (an agent
// restarted) recognizes every rule and writes nothing: no nf_tables
// notification, every rule's handle and counter as before.
func TestRestartWritesNothing(t *testing.T) {
	f := newFixtureWith(t, noWatch)
	f.addForeign()
	if err := f.write(restartRules()); err != nil {
		t.Fatal(err)
	}
	f.sendPackets()
	before := netnstest.NFTRules(t, f.ns)
	counted := false
	for _, r := range before {
		counted = counted || r.Packets > 0
	}
	if !counted {
		t.Fatalf("no rule counted the packets: %+v", before)
	}

	restarted, err := NewTarget(TargetConfig{NetNS: string(f.ns), Rules: f.table, DisableWatch: true})
	if err != nil {
		t.Fatal(err)
	}
	w := netnstest.WatchWrites(t, f.ns)
	f.updateAll(restarted)
	if err := restarted.Prune(context.Background(), nil, f.table.All(f.db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
	if _, nft := w.Stop(); len(nft) > 0 {
		t.Errorf("the restarted target wrote %d nf_tables changes, want none: %q", len(nft), nft[:min(len(nft), 5)])
	}
	if after := netnstest.NFTRules(t, f.ns); !slices.Equal(after, before) {
		t.Errorf("rules (handles, counters) changed:\nbefore %+v\nafter  %+v", before, after)
	}
	if restarted.scratches.Load() == 0 {
		t.Errorf("without a TextStore, the restarted target recognized its rules without learning their texts")
	}
	f.expectForeign()
}

// A rule changed by hand while no target ran is the only one a restarted
// target writes again: the other rules keep their handles.
func TestRestartRewritesOnlyWhatChanged(t *testing.T) {
	f := newFixtureWith(t, noWatch)
	rules := restartRules()
	if err := f.write(rules); err != nil {
		t.Fatal(err)
	}
	owned := DefaultChainPrefix + "-INPUT"
	f.sh("-R", owned, "5", "-s", "192.0.2.0/24", "-j", "DROP") // r003, changed by hand
	before := netnstest.NFTRules(t, f.ns)

	restarted, err := NewTarget(TargetConfig{NetNS: string(f.ns), Rules: f.table, DisableWatch: true})
	if err != nil {
		t.Fatal(err)
	}
	f.updateAll(restarted)
	var names []string
	for _, r := range rules {
		if r.Chain == "INPUT" {
			names = append(names, r.Name)
		}
	}
	f.expect("filter", "INPUT", names...)
	after := netnstest.NFTRules(t, f.ns)
	kept := map[uint64]bool{}
	for _, r := range after {
		kept[r.Handle] = true
	}
	var changed []netnstest.NFTRule
	for _, r := range before {
		if !kept[r.Handle] {
			changed = append(changed, r)
		}
	}
	if len(changed) != 1 || changed[0].Chain != owned {
		t.Errorf("rules written again: %+v; want only the one of %s changed by hand", changed, owned)
	}
}

// memTexts is a TextStore in memory.
type memTexts struct {
	mu    sync.Mutex
	texts map[textKey]string
}

func (m *memTexts) LoadTexts() ([]RuleText, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []RuleText
	for k, v := range m.texts {
		out = append(out, RuleText{k.table, k.owned, k.args, v})
	}
	return out, nil
}

func (m *memTexts) SaveTexts(put, forget []RuleText) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, rt := range forget {
		delete(m.texts, textKey{rt.Table, rt.Chain, rt.Spec})
	}
	for _, rt := range put {
		m.texts[textKey{rt.Table, rt.Chain, rt.Spec}] = rt.Text
	}
	return nil
}

func (m *memTexts) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.texts)
}

// With a TextStore, a restarted target recognizes the rules in place
// from the texts an earlier one saved, without learning them in a scratch
// namespace, and writes nothing; a prune forgets the texts of rules no
// longer desired.
func TestRestartWithSavedTexts(t *testing.T) {
	f := newFixtureWith(t, noWatch)
	rules := restartRules()
	store := &memTexts{texts: map[textKey]string{}}
	first, err := NewTarget(TargetConfig{NetNS: string(f.ns), Rules: f.table, DisableWatch: true, Texts: store})
	if err != nil {
		t.Fatal(err)
	}
	wtxn := f.db.WriteTxn(f.table)
	for _, r := range rules {
		f.table.Insert(wtxn, r)
	}
	wtxn.Commit()
	f.updateAll(first) // writes the rules
	f.updateAll(first) // reads them back: saves their texts
	if n := store.len(); n != len(rules) {
		t.Fatalf("%d texts saved after a read, want %d", n, len(rules))
	}
	// What a plan learns is saved too.
	planned := &memTexts{texts: map[textKey]string{}}
	planner, err := NewTarget(TargetConfig{NetNS: string(f.ns), Rules: f.table, DisableWatch: true, Texts: planned})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := planner.PlanPrune(context.Background(), nil, f.table.All(f.db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
	if n := planned.len(); n != len(rules) {
		t.Fatalf("%d texts saved after a plan, want %d", n, len(rules))
	}
	before := netnstest.NFTRules(t, f.ns)

	restarted, err := NewTarget(TargetConfig{NetNS: string(f.ns), Rules: f.table, DisableWatch: true, Texts: store})
	if err != nil {
		t.Fatal(err)
	}
	w := netnstest.WatchWrites(t, f.ns)
	f.updateAll(restarted)
	if _, nft := w.Stop(); len(nft) > 0 {
		t.Errorf("the restarted target wrote %d nf_tables changes, want none", len(nft))
	}
	if n := restarted.scratches.Load(); n != 0 {
		t.Errorf("the restarted target learned in %d scratch namespaces, want none (the texts were saved)", n)
	}
	if after := netnstest.NFTRules(t, f.ns); !slices.Equal(after, before) {
		t.Errorf("rules (handles, counters) changed")
	}

	// One rule less: its text is forgotten.
	wtxn = f.db.WriteTxn(f.table)
	f.table.Delete(wtxn, rules[1])
	wtxn.Commit()
	if err := restarted.Prune(context.Background(), nil, f.table.All(f.db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
	if n := store.len(); n != len(rules)-1 {
		t.Errorf("%d texts saved after a rule went, want %d", n, len(rules)-1)
	}
}
