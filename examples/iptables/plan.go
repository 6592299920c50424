package iptables

import (
	"context"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// The target's plan: what Update, Delete and Prune would change in the
// owned chains, found by reading them with iptables-save and recognizing
// the rules by how iptables shows them (learned without touching the
// managed namespace, see learn.go), so that a new target (a new process)
// plans as well as one that wrote the rules. Changes:
//
//	add rule filter/INPUT/ssh: -p tcp --dport 22 -j ACCEPT     a desired rule that is missing
//	change rule filter/INPUT/ssh: move to position 2 of ...    one that is out of order
//	remove rule filter/STEADYSTATE-INPUT: -p icmp -j ACCEPT     a rule of an owned chain that is not desired
//	add chain filter/STEADYSTATE-INPUT, add hook filter/INPUT -> STEADYSTATE-INPUT
//	remove chain ..., remove hook ...
//
// The work is shared so that a dry run (reconciler.DryRun: the prune plan,
// then every object's update plan in key order) lists each change once: an
// object's update plan lists its own rule, and with the chain's first rule
// in key order what an Update does to the chain as a whole (the chain and
// hook where missing, strays and extra hooks removed, which the prune plan
// lists too: DryRun lists a change once); the prune plan lists what is not
// desired (leftovers, strays, duplicates, rules changed by hand, extra
// hooks, chains without desired rules) and, marked Repair, the desired
// rules it puts back. An Update or a Prune also brings the other rules of
// the chains it touches in line; their own plans list those changes.

var _ reconciler.Planner[*Rule] = (*Target)(nil)

// PlanUpdate returns what Update(obj) would change for obj: adding its
// rule (and, for the chain's first rule in key order, the chain and its
// hook where missing, and the removal of rules of the chain that are not
// desired and of extra hooks, which an Update removes too), or moving it
// into place, or nothing when it is in place. txn is the Rules table's
// snapshot, which orders the chain. Errors: those of Update (an invalid
// rule and one iptables rejects are terminal; errNoSnapshot without txn),
// iptables-save's, and learning's.
func (t *Target) PlanUpdate(ctx context.Context, txn statedb.ReadTxn, obj *Rule) (reconciler.Plan, error) {
	b := []reconciler.PlanEntry[*Rule]{{Object: obj}}
	t.PlanUpdateBatch(ctx, txn, b)
	return b[0].Plan, b[0].Result
}

var _ reconciler.BatchPlanner[*Rule] = (*Target)(nil)

// PlanUpdateBatch implements reconciler.BatchPlanner: each entry gets
// PlanUpdate's plan and error, for one iptables-save per table of the
// batch instead of one per rule. A failure to read or learn a table is the
// error of each of its entries.
func (t *Target) PlanUpdateBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.PlanEntry[*Rule]) {
	for i := range batch {
		batch[i].Plan, batch[i].Result = nil, nil
		switch {
		case ctx.Err() != nil:
			batch[i].Result = ctx.Err()
		case txn == nil:
			batch[i].Result = errNoSnapshot
		}
	}
	if txn == nil || ctx.Err() != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	// The batch's objects override the snapshot, as in an Update; grouped
	// by table and chain.
	type chainEntries struct {
		entries map[string]*batchItem
		idx     []int // into batch
	}
	tables := map[string]map[chainID]*chainEntries{}
	items := make([]batchItem, len(batch))
	for i := range batch {
		e := &batch[i]
		d, err := t.prepare(e.Object)
		if err != nil {
			e.Result = reconciler.Terminal(err)
			continue
		}
		c := chainID{e.Object.Table, e.Object.Chain}
		if tables[c.table] == nil {
			tables[c.table] = map[chainID]*chainEntries{}
		}
		ce := tables[c.table][c]
		if ce == nil {
			ce = &chainEntries{entries: map[string]*batchItem{}}
			tables[c.table][c] = ce
		}
		items[i] = batchItem{entry: &reconciler.BatchEntry[*Rule]{Object: e.Object}, d: d}
		ce.entries[d.key] = &items[i]
		ce.idx = append(ce.idx, i)
	}
	for _, tbl := range slices.Sorted(maps.Keys(tables)) {
		chains := tables[tbl]
		desired := map[chainID][]desiredRule{}
		byOwned := map[string][]desiredRule{}
		for c, ce := range chains {
			desired[c] = t.desiredChain(txn, c, len(ce.entries), ce.entries, false)
			byOwned[t.ChainName(c.chain)] = desired[c]
		}
		fail := func(err error) {
			for _, ce := range chains {
				for _, i := range ce.idx {
					batch[i].Result = err
				}
			}
		}
		if err := t.learnTexts(ctx, tbl, byOwned); err != nil {
			fail(err)
			continue
		}
		st, err := t.save(ctx, tbl)
		if err != nil {
			fail(err)
			continue
		}
		for c, ce := range chains {
			v := newRuleView(t.view(st, tbl, t.ChainName(c.chain), desired[c]))
			for _, i := range ce.idx {
				batch[i].Plan, batch[i].Result = t.planRule(st, v, items[i].d)
			}
		}
	}
}

// ruleView is a chain plan with what the plans of its rules look up, each
// computed once for the whole chain: which actual rules stay in place,
// where each rule is, and the chain's first rule in key order.
type ruleView struct {
	p     *chainPlan
	kept  []bool
	at    map[chainRule]int // actual position of each identified rule (name, args), the first
	pos   map[string]int    // desired position, by key
	first string            // key of the chain's first rule in key order
}

func newRuleView(p *chainPlan) *ruleView {
	v := &ruleView{p: p, kept: p.keep(), at: make(map[chainRule]int, len(p.actual)), pos: make(map[string]int, len(p.desired))}
	for i, r := range p.actual {
		k := chainRule{name: r.name, args: r.args}
		if _, ok := v.at[k]; !ok && r.name != "" {
			v.at[k] = i
		}
	}
	for i, d := range p.desired {
		v.pos[d.key] = i
		if v.first == "" || d.key < v.first {
			v.first = d.key
		}
	}
	return v
}

// planRule is the plan of an Update of the desired rule d of the chain
// of v (its rules identified), given the table's state st. t.mu is held.
func (t *Target) planRule(st *tableState, v *ruleView, d desiredRule) (reconciler.Plan, error) {
	p := v.p
	if l := t.texts[textKey{p.table, p.owned, d.args}]; l.rejected != nil {
		return nil, reconciler.Terminal(l.rejected)
	}
	var plan reconciler.Plan
	if v.first == d.key {
		// What the Update does to the chain as a whole goes with the
		// chain's first rule in key order, which a dry run plans first:
		// the chain and its hook where missing, the rules that are not
		// desired there and extra hooks removed.
		plan = append(plan, p.missingChainAndHook(st)...)
		for _, r := range p.actual {
			if r.name == "" {
				plan = append(plan, p.strayRemoval(r))
			}
		}
		plan = append(plan, p.extraHooks(st)...)
	}
	at, found := v.at[chainRule{name: d.name, args: d.args}]
	switch {
	case !found:
		plan = append(plan, reconciler.Change{Action: reconciler.ActionAdd, Object: "rule " + d.key, Detail: d.args})
	case !v.kept[at]:
		plan = append(plan, reconciler.Change{Action: reconciler.ActionChange, Object: "rule " + d.key,
			Detail: "move to position " + strconv.Itoa(v.pos[d.key]+1) + " of " + p.owned})
	}
	return plan, nil
}

// PlanDelete returns what Delete(obj) would change for obj: removing its
// rule if it is in its chain, and the chain and its hooks when no other
// rule of the chain is desired in txn. An invalid rule, never applied,
// plans nothing. Errors: errNoSnapshot without txn, iptables-save's and
// learning's.
func (t *Target) PlanDelete(ctx context.Context, txn statedb.ReadTxn, obj *Rule) (reconciler.Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if txn == nil {
		return nil, errNoSnapshot
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	d, err := newDesiredRule(obj)
	if err != nil {
		return nil, nil
	}
	c := chainID{obj.Table, obj.Chain}
	owned := t.ChainName(obj.Chain)
	entry := &batchItem{entry: &reconciler.BatchEntry[*Rule]{Object: obj}, d: d}
	others := t.desiredChain(txn, c, 1, map[string]*batchItem{d.key: entry}, true)
	if err := t.learnTexts(ctx, obj.Table, map[string][]desiredRule{owned: {d}}); err != nil {
		return nil, err
	}
	st, err := t.save(ctx, obj.Table)
	if err != nil {
		return nil, err
	}
	var plan reconciler.Plan
	p := t.view(st, obj.Table, owned, []desiredRule{d})
	if slices.ContainsFunc(p.actual, func(r chainRule) bool { return r.name == d.name && r.args == d.args }) {
		plan = append(plan, reconciler.Change{Action: reconciler.ActionRemove, Object: "rule " + d.key, Detail: d.args})
	}
	if len(others) == 0 {
		plan = append(plan, p.unhook(st)...)
	}
	return plan, nil
}

// PlanPrune returns what Prune would change in the owned chains of every
// table: the rules that are not desired there (leftovers, strays,
// duplicates, rules changed by hand), hooks other than the one from each
// chain's built-in chain, and the chains that have no desired rules, with
// their rules and hooks, removed; and the desired rules of the owned chains
// that are missing or out of place, put back (listed as their update plans
// list them). Rules and chains the target does not own are never listed,
// nor are owned chains deleted by hand, which Prune does not recreate (a
// refresh's Updates do). Errors: iptables-save's and learning's.
func (t *Target) PlanPrune(ctx context.Context, _ statedb.ReadTxn, desired iter.Seq2[*Rule, statedb.Revision]) (reconciler.Plan, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out, err := t.run(ctx, nil, t.saveCmd)
	if err != nil {
		return nil, err
	}
	state, err := parseSave(out, t.prefix)
	if err != nil {
		return nil, err
	}
	want := map[recordKey][]desiredRule{}
	keepTexts := map[textKey]bool{}
	for r := range desired {
		d, err := t.prepare(r)
		if err != nil || t.rejected[d.key] == d.args {
			continue
		}
		k := recordKey{r.Table, t.ChainName(r.Chain)}
		want[k] = append(want[k], d)
		keepTexts[textKey{k.table, k.owned, d.args}] = true
	}
	t.forgetTexts(keepTexts) // what is no longer desired
	var plan reconciler.Plan
	for _, tbl := range slices.Sorted(maps.Keys(state)) {
		st := state[tbl]
		owned := map[string]bool{}
		for c := range st.chains {
			if strings.HasPrefix(c, t.prefix+"-") {
				owned[c] = true
			}
		}
		for hk := range st.hooks {
			owned[hk.To] = true
		}
		chains := map[string][]desiredRule{}
		for c := range owned {
			if d := want[recordKey{tbl, c}]; len(d) > 0 {
				sortDesired(d)
				chains[c] = d
			}
		}
		if err := t.learnTexts(ctx, tbl, chains); err != nil {
			return nil, err
		}
		for _, c := range slices.Sorted(maps.Keys(owned)) {
			p := t.view(st, tbl, c, chains[c])
			if len(p.desired) == 0 {
				for _, r := range p.actual {
					plan = append(plan, p.strayRemoval(r))
				}
				plan = append(plan, p.unhook(st)...)
				continue
			}
			for _, r := range p.actual {
				if r.name == "" {
					plan = append(plan, p.strayRemoval(r))
				}
			}
			// Prune also puts the chain's desired rules back in place:
			// list those changes as their update plans do, so that the
			// reconciler does not skip a Prune that has work to do, and a
			// dry run lists them once.
			plan = append(plan, p.restorations()...)
			plan = append(plan, p.extraHooks(st)...)
		}
	}
	return plan, nil
}

// view returns the chain plan of the owned chain of table with desired,
// its actual rules identified by their learned texts (each text once, in
// chain order), or by the record without a scratch namespace. t.mu is
// held.
func (t *Target) view(st *tableState, table, owned string, desired []desiredRule) *chainPlan {
	p := &chainPlan{table: table, from: builtinOf(owned, t.prefix), owned: owned, desired: desired}
	if t.noScratch {
		// Nothing learned: identify as the operations do.
		p.actual = identify(t.learnedRecord(table, owned), st.owned[owned])
		return p
	}
	p.actual = t.identifyLearned(table, owned, desired, st.owned[owned])
	return p
}

// identifyLearned names the rules of the owned chain of table, given as
// iptables-save shows them (lines, in order), by the texts learned for the
// desired rules: a line that is a desired rule's learned text is that
// rule (each text once, in chain order); the others are left
// unidentified. t.mu is held.
func (t *Target) identifyLearned(table, owned string, desired []desiredRule, lines []string) []chainRule {
	byText := map[string][]int{}
	for i, d := range desired {
		if l := t.texts[textKey{table, owned, d.args}]; l.text != "" {
			byText[l.text] = append(byText[l.text], i)
		}
	}
	out := make([]chainRule, len(lines))
	for i, line := range lines {
		out[i] = chainRule{text: line}
		if q := byText[line]; len(q) > 0 {
			out[i].name, out[i].args = desired[q[0]].name, desired[q[0]].args
			byText[line] = q[1:]
		}
	}
	return out
}

// restorations plans putting the chain's desired rules back: the missing
// ones added, the ones out of place moved, as PlanUpdate plans them, each
// marked Repair (drift a prune repairs, not a leftover it removes).
func (p *chainPlan) restorations() reconciler.Plan {
	var plan reconciler.Plan
	v := newRuleView(p)
	for pos, d := range p.desired {
		at, found := v.at[chainRule{name: d.name, args: d.args}]
		switch {
		case !found:
			plan = append(plan, reconciler.Change{Action: reconciler.ActionAdd, Object: "rule " + d.key, Detail: d.args, Repair: true})
		case !v.kept[at]:
			plan = append(plan, reconciler.Change{Action: reconciler.ActionChange, Object: "rule " + d.key,
				Detail: "move to position " + strconv.Itoa(pos+1) + " of " + p.owned, Repair: true})
		}
	}
	return plan
}

// missingChainAndHook plans creating the owned chain and its hook, where
// missing.
func (p *chainPlan) missingChainAndHook(st *tableState) reconciler.Plan {
	var plan reconciler.Plan
	if !st.chains[p.owned] {
		plan = append(plan, reconciler.Change{Action: reconciler.ActionAdd, Object: "chain " + p.table + "/" + p.owned})
	}
	if st.hooks[hookKey{p.from, p.owned}] == 0 {
		plan = append(plan, reconciler.Change{Action: reconciler.ActionAdd, Object: p.hookName(p.from)})
	}
	return plan
}

// unhook plans removing every hook into the owned chain and the chain.
func (p *chainPlan) unhook(st *tableState) reconciler.Plan {
	var plan reconciler.Plan
	for _, hk := range sortedHooks(st) {
		for n := st.hooks[hk]; hk.To == p.owned && n > 0; n-- {
			plan = append(plan, reconciler.Change{Action: reconciler.ActionRemove, Object: p.hookName(hk.From)})
		}
	}
	if st.chains[p.owned] {
		plan = append(plan, reconciler.Change{Action: reconciler.ActionRemove, Object: "chain " + p.table + "/" + p.owned})
	}
	return plan
}

// extraHooks plans removing the hooks into the owned chain beyond the one
// from its built-in chain.
func (p *chainPlan) extraHooks(st *tableState) reconciler.Plan {
	var plan reconciler.Plan
	for _, hk := range sortedHooks(st) {
		n := st.hooks[hk]
		if hk.To != p.owned {
			continue
		}
		if hk.From == p.from {
			n-- // the one that stays
		}
		for ; n > 0; n-- {
			plan = append(plan, reconciler.Change{Action: reconciler.ActionRemove, Object: p.hookName(hk.From)})
		}
	}
	return plan
}

// strayRemoval plans removing the rule r of the owned chain.
func (p *chainPlan) strayRemoval(r chainRule) reconciler.Change {
	return reconciler.Change{Action: reconciler.ActionRemove, Object: "rule " + p.table + "/" + p.owned,
		Detail: strings.TrimPrefix(r.text, "-A "+p.owned+" ")}
}

func (p *chainPlan) hookName(from string) string {
	return "hook " + p.table + "/" + from + " -> " + p.owned
}

func sortedHooks(st *tableState) []hookKey {
	return slices.SortedFunc(maps.Keys(st.hooks), func(a, b hookKey) int {
		return strings.Compare(a.From+" "+a.To, b.From+" "+b.To)
	})
}
