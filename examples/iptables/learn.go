package iptables

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/steadystate/steadystate/examples/netnsutil"
)

// How iptables-save shows a rule is not its spec: iptables adds matches
// ("-p tcp --dport 22" shows as "-p tcp -m tcp --dport 22"), masks, quotes.
// The target's record learns these texts after writing (see record.go). A
// plan must recognize rules without writing, and without a record (in a
// new process), so it learns them elsewhere: it writes the desired rules,
// into the owned chains hooked from their built-in chains exactly as the
// target would, in a scratch network namespace of its own (see
// netnsutil.Scratch), and reads them back with iptables-save. Texts are
// kept per table, chain and spec while the rule is desired. Where no
// scratch namespace can be made, plans identify rules by the record, as
// the operations do: a new target then plans its chains rewritten, as its
// first operation on each does.

// textKey names a learned text: a canonical spec in an owned chain.
type textKey struct{ table, owned, args string }

// learned is what learning found for a rule: how iptables-save shows it, or
// why iptables rejected it.
type learned struct {
	text     string
	rejected error
	saved    bool // in the target's TextStore (texts.go)
}

// learnTexts makes sure t.texts holds every rule of chains (the desired
// rules of owned chains of table, by owned chain): from the TextStore, or
// learning the missing ones in one scratch namespace. Where no scratch
// namespace can be made (no CAP_SYS_ADMIN), it sets t.noScratch and plans
// fall back on the target's record, as its operations do. t.mu is held.
func (t *Target) learnTexts(ctx context.Context, table string, chains map[string][]desiredRule) error {
	t.loadTexts()
	if t.noScratch {
		return nil
	}
	err := t.learnTextsIn(ctx, table, chains)
	if errors.Is(err, netnsutil.ErrNoScratch) {
		t.noScratch = true
		return nil
	}
	return err
}

func (t *Target) learnTextsIn(ctx context.Context, table string, chains map[string][]desiredRule) error {
	var todo []*chainPlan
	for owned, rules := range chains {
		var missing []desiredRule
		for _, d := range rules {
			if _, ok := t.texts[textKey{table, owned, d.args}]; !ok {
				missing = append(missing, d)
			}
		}
		if len(missing) > 0 {
			todo = append(todo, &chainPlan{table: table, from: builtinOf(owned, t.prefix), owned: owned, desired: missing})
		}
	}
	if len(todo) == 0 {
		return nil
	}
	t.scratches.Add(1)
	// What is learned is saved too (a plan learns the texts of a chain
	// the target wrote: the next restart has them).
	var put []RuleText
	defer func() { t.persist(put, nil) }()
	return netnsutil.Scratch(func() error {
		for attempt := 0; ; attempt++ {
			in := &restoreInput{}
			in.add("", "*", table)
			for _, p := range todo {
				in.add("", ":", p.owned, " - [0:0]")
			}
			for _, p := range todo {
				in.add("", "-A ", p.from, " -j ", p.owned)
				for _, d := range p.desired {
					in.addCmd(d.key, "-A ", p.owned, " ", d.args)
				}
			}
			in.add("", "COMMIT")
			if in.cmds == 0 {
				return nil
			}
			_, err := runCommand(ctx, in.buf, t.restoreCmd, "--wait")
			if err != nil {
				var ce *commandError
				key := ""
				if errors.As(err, &ce) {
					key = in.rule(errorLine(ce.stderr))
				}
				if key == "" || attempt >= MaxCulpritsPerBatch {
					return fmt.Errorf("learning how iptables shows rules of table %s: %w", table, err)
				}
				// Remember the rejection and try again without the rule.
				for _, p := range todo {
					for i, d := range p.desired {
						if d.key == key {
							t.texts[textKey{table, p.owned, d.args}] = learned{rejected: fmt.Errorf("iptables rejected rule %s: %s", key, ce.stderr)}
							p.desired = append(p.desired[:i:i], p.desired[i+1:]...)
							break
						}
					}
				}
				continue
			}
			out, err := runCommand(ctx, nil, t.saveCmd, "-t", table)
			if err != nil {
				return err
			}
			state, err := parseSave(out, t.prefix)
			if err != nil {
				return err
			}
			st := state[table]
			for _, p := range todo {
				var lines []string
				if st != nil {
					lines = st.owned[p.owned]
				}
				if len(lines) != len(p.desired) {
					return fmt.Errorf("learning how iptables shows rules of %s/%s: wrote %d rules, iptables-save shows %d", table, p.owned, len(p.desired), len(lines))
				}
				for i, d := range p.desired {
					// A copy: a piece of out would hold all of it for as
					// long as one rule's text is kept.
					text := strings.Clone(lines[i])
					t.texts[textKey{table, p.owned, d.args}] = learned{text: text}
					put = append(put, RuleText{table, p.owned, d.args, text})
				}
			}
			return nil
		}
	})
}

// builtinOf returns the built-in chain of an owned chain's name.
func builtinOf(owned, prefix string) string { return owned[len(prefix)+1:] }

// learnUnrecorded learns the texts of the desired rules of every chain of
// plans that has rules but no record (the target has not written it since
// it started: after a restart), so that apply recognizes the rules already
// in place by their text and leaves them alone instead of rewriting the
// chain. A chain that is empty or absent needs nothing learned. If
// learning fails (no scratch namespace, a failing iptables-restore), the
// rules of those chains are not recognized and the chains are rewritten,
// as a target without a record always did. t.mu is held.
func (t *Target) learnUnrecorded(ctx context.Context, plans []*chainPlan, state map[string]*tableState) {
	todo := map[string]map[string][]desiredRule{} // by table, owned chain
	for _, p := range plans {
		st := state[p.table]
		if st == nil || len(st.owned[p.owned]) == 0 || len(p.desired) == 0 || len(t.written[recordKey{p.table, p.owned}]) > 0 {
			continue
		}
		if todo[p.table] == nil {
			todo[p.table] = map[string][]desiredRule{}
		}
		todo[p.table][p.owned] = p.desired
	}
	for table, chains := range todo {
		_ = t.learnTexts(ctx, table, chains) // on failure: rewritten, see above
	}
}
