package iptables

import (
	gocmp "cmp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// desiredRule is a desired rule ready to be written.
type desiredRule struct {
	key  string
	name string
	prio int
	args string // canonical spec: what is written after "-A <chain> "
}

// newDesiredRule checks r and prepares it; errors are those of Validate.
func newDesiredRule(r *Rule) (desiredRule, error) {
	args, err := r.canonical()
	if err != nil {
		return desiredRule{}, err
	}
	return desiredRule{key: r.Key(), name: r.Name, prio: r.Priority, args: args}, nil
}

// ruleID is a rule's primary key, as a map key that costs no allocation.
type ruleID struct{ table, chain, name string }

func idOf(r *Rule) ruleID { return ruleID{r.Table, r.Chain, r.Name} }

type preparedRule struct {
	obj *Rule
	d   desiredRule
	err error
}

// prepare returns r checked and rendered (see newDesiredRule), from the
// cache if r was prepared before. The key is set even on error. t.mu is
// held.
func (t *Target) prepare(r *Rule) (desiredRule, error) {
	id := idOf(r)
	if p, ok := t.prepared[id]; ok && p.obj == r {
		return p.d, p.err
	}
	d, err := newDesiredRule(r)
	if err != nil {
		d = desiredRule{key: r.Key()}
	}
	t.prepared[id] = preparedRule{obj: r, d: d, err: err}
	return d, err
}

// sortDesired orders rules as they go into their chain: by priority, then
// name. Rules usually come in name order with equal priorities, which is
// checked first.
func sortDesired(rules []desiredRule) {
	cmp := func(a, b desiredRule) int {
		if a.prio != b.prio {
			return gocmp.Compare(a.prio, b.prio)
		}
		return strings.Compare(a.name, b.name)
	}
	if !slices.IsSortedFunc(rules, cmp) {
		slices.SortFunc(rules, cmp)
	}
}

// restoreInput is iptables-restore input under construction. It remembers
// which line inserts which rule, so that an error reported for a line can
// be pinned on that rule.
type restoreInput struct {
	buf    []byte
	ruleAt []string // by line number - 1: key of the rule the line inserts
	cmds   int      // lines that change something
	tables int      // sections (one COMMIT each)
}

// add appends a line made of parts; ruleKey names the rule it inserts.
func (in *restoreInput) add(ruleKey string, parts ...string) {
	for _, p := range parts {
		in.buf = append(in.buf, p...)
	}
	in.buf = append(in.buf, '\n')
	in.ruleAt = append(in.ruleAt, ruleKey)
}

// addCmd is add for a line that changes something.
func (in *restoreInput) addCmd(ruleKey string, parts ...string) {
	in.add(ruleKey, parts...)
	in.cmds++
}

// rule returns the key of the rule inserted at line n (1-based), or "".
func (in *restoreInput) rule(n int) string {
	if n < 1 || n > len(in.ruleAt) {
		return ""
	}
	return in.ruleAt[n-1]
}

// chainPlan is the work on one owned chain: turn the chain's rules
// (actual) into desired.
type chainPlan struct {
	table, from, owned string // iptables table, built-in chain, owned chain
	desired            []desiredRule
	// actual is the chain's content as identify found it; set by apply.
	actual []chainRule
	// result is the chain's content once the commands are applied, with
	// the iptables-save text of the rules that stayed; set by commands.
	result []chainRule
}

// hookSpec is the jump rule (after the chain) that hooks owned into its
// built-in chain.
func hookSpec(owned string) string {
	return "-m comment --comment " + quoteArg(HookComment) + " -j " + owned
}

// declare appends the chain declarations the plan needs; they go before
// any rule of the table's section.
func (p *chainPlan) declare(in *restoreInput, st *tableState) {
	if len(p.desired) > 0 && !st.chains[p.owned] {
		in.addCmd("", ":", p.owned, " - [0:0]")
	}
}

// commands appends the rule commands of the plan. Rules are deleted by
// position, highest first, and then inserted in their final order, each
// at its final position, so that rules that are already right stay in
// place and no packet sees a half-filled chain within the atomic batch.
// When no rule stays, the chain is flushed instead (one command, not one
// per rule).
func (p *chainPlan) commands(in *restoreInput, st *tableState) {
	exists := st.chains[p.owned]
	p.result = nil
	if len(p.desired) == 0 {
		// No desired rules: unhook the chain and remove it.
		for hk, n := range st.hooks {
			for hk.To == p.owned && n > 0 {
				in.addCmd("", "-D ", hk.From, " ", hookSpec(p.owned))
				n--
			}
		}
		if exists {
			in.addCmd("", "-F ", p.owned)
			in.addCmd("", "-X ", p.owned)
		}
		return
	}
	p.hooks(in, st)

	kept := p.keep()
	nKept := 0
	for _, k := range kept {
		if k {
			nKept++
		}
	}
	if nKept == 0 && len(p.actual) > 0 {
		in.addCmd("", "-F ", p.owned)
	} else {
		for pos := len(p.actual); pos >= 1; pos-- {
			if !kept[pos-1] {
				in.addCmd("", "-D ", p.owned, " ", strconv.Itoa(pos))
			}
		}
	}
	p.result = make([]chainRule, len(p.desired))
	present := make([]bool, len(p.desired))
	maxKept := -1
	idx := p.index()
	for i, r := range p.actual {
		if kept[i] {
			d := idx[r.name]
			present[d] = true
			p.result[d] = r
			maxKept = max(maxKept, d)
		}
	}
	for i, d := range p.desired {
		if present[i] {
			continue
		}
		p.result[i] = chainRule{name: d.name, args: d.args}
		if i > maxKept {
			in.addCmd(d.key, "-A ", p.owned, " ", d.args)
		} else {
			in.addCmd(d.key, "-I ", p.owned, " ", strconv.Itoa(i+1), " ", d.args)
		}
	}
}

// hooks makes sure exactly one hook jumps into the owned chain, from its
// built-in chain.
func (p *chainPlan) hooks(in *restoreInput, st *tableState) {
	found := false
	for hk, n := range st.hooks {
		if hk.To != p.owned {
			continue
		}
		if hk.From == p.from && !found {
			found = true
			n--
		}
		for ; n > 0; n-- {
			in.addCmd("", "-D ", hk.From, " ", hookSpec(p.owned))
		}
	}
	if !found {
		in.addCmd("", "-I ", p.from, " 1 ", hookSpec(p.owned))
	}
}

func (p *chainPlan) index() map[string]int {
	idx := make(map[string]int, len(p.desired))
	for i, d := range p.desired {
		idx[d.name] = i
	}
	return idx
}

// keep returns which actual rules stay: those identified as a desired
// rule written with its current spec, and already in desired order (the
// longest such sequence, so the fewest rules move).
func (p *chainPlan) keep() []bool {
	kept := make([]bool, len(p.actual))
	idx := p.index()
	seen := make(map[string]bool, len(p.actual))
	var pos, order []int // candidate positions in actual, and their desired index
	for i, r := range p.actual {
		d, ok := idx[r.name]
		if !ok || r.name == "" || seen[r.name] {
			continue
		}
		if p.desired[d].args == r.args {
			seen[r.name] = true
			pos = append(pos, i)
			order = append(order, d)
		}
	}
	for _, j := range longestIncreasing(order) {
		kept[pos[j]] = true
	}
	return kept
}

// longestIncreasing returns the indices of a longest strictly increasing
// subsequence of s, in order (patience sorting, O(n log n)).
func longestIncreasing(s []int) []int {
	if len(s) == 0 {
		return nil
	}
	tails := []int{}            // tails[k]: index in s of the smallest tail of a run of length k+1
	prev := make([]int, len(s)) // predecessor of each element in its run
	for i, v := range s {
		k := sort.Search(len(tails), func(k int) bool { return s[tails[k]] >= v })
		if k > 0 {
			prev[i] = tails[k-1]
		} else {
			prev[i] = -1
		}
		if k == len(tails) {
			tails = append(tails, i)
		} else {
			tails[k] = i
		}
	}
	out := make([]int, len(tails))
	for i, k := len(tails)-1, tails[len(tails)-1]; i >= 0; i, k = i-1, prev[k] {
		out[i] = k
	}
	return out
}
