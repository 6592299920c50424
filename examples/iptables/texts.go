package iptables

import (
	"cmp"
	"slices"
	"strings"
)

// How iptables shows the target's rules, kept across restarts. A target
// that starts over chains it wrote before (a restarted agent) recognizes
// their rules by these texts (see learnUnrecorded); with a TextStore
// (TargetConfig.Texts) it has them at once, instead of learning them in a
// scratch namespace, which costs an iptables-restore of every rule. The
// store is a cache: a text it lacks is learned, one that iptables no
// longer shows (another iptables version) only leaves its rule
// unrecognized, to be written again; a failure to save is not the
// operation's.

// RuleText is how iptables-save shows a rule of an owned chain: Text is
// the rule's line ("-A STEADYSTATE-INPUT -p tcp -m tcp --dport 22 -j
// ACCEPT") when written into Chain (the owned chain) of Table with the
// canonical spec Spec.
type RuleText struct {
	Table, Chain, Spec, Text string
}

// TextStore keeps RuleTexts across restarts (TargetConfig.Texts).
type TextStore interface {
	// LoadTexts returns every text saved.
	LoadTexts() ([]RuleText, error)
	// SaveTexts saves put and forgets forget (by Table, Chain and Spec)
	// in one step.
	SaveTexts(put, forget []RuleText) error
}

// loadTexts fills t.texts from the store, once. A failure leaves them to
// be learned. t.mu is held.
func (t *Target) loadTexts() {
	if t.store == nil || t.storeLoaded {
		return
	}
	t.storeLoaded = true
	saved, err := t.store.LoadTexts()
	if err != nil {
		return
	}
	for _, rt := range saved {
		k := textKey{rt.Table, rt.Chain, rt.Spec}
		if _, ok := t.texts[k]; !ok {
			t.texts[k] = learned{text: rt.Text, saved: true}
		}
	}
}

// saveTexts remembers, and saves in the store, the texts of the rules the
// plans left in place or identified (their result). Without a store there
// is nothing to do: the record holds them. t.mu is held.
func (t *Target) saveTexts(plans []*chainPlan) {
	if t.store == nil {
		return
	}
	var put []RuleText
	for _, p := range plans {
		for _, r := range p.result {
			if r.text == "" || r.args == "" {
				continue
			}
			if l := t.texts[textKey{p.table, p.owned, r.args}]; l.text != r.text || !l.saved {
				put = append(put, RuleText{p.table, p.owned, r.args, r.text})
			}
		}
	}
	t.persist(put, nil)
}

// forgetTexts forgets (and drops from the store) the texts that keep does
// not hold. t.mu is held.
func (t *Target) forgetTexts(keep map[textKey]bool) {
	var forget []RuleText
	for k, l := range t.texts {
		if !keep[k] {
			if l.saved {
				forget = append(forget, RuleText{k.table, k.owned, k.args, l.text})
			}
			delete(t.texts, k)
		}
	}
	t.persist(nil, forget)
}

// persist saves put (also into t.texts) and forgets forget in the store,
// if any; put is marked saved if that worked. t.mu is held.
func (t *Target) persist(put, forget []RuleText) {
	if t.store == nil || len(put) == 0 && len(forget) == 0 {
		return
	}
	slices.SortFunc(put, func(a, b RuleText) int {
		return cmp.Or(strings.Compare(a.Table, b.Table), strings.Compare(a.Chain, b.Chain), strings.Compare(a.Spec, b.Spec))
	})
	saved := t.store.SaveTexts(put, forget) == nil
	for _, rt := range put {
		t.texts[textKey{rt.Table, rt.Chain, rt.Spec}] = learned{text: rt.Text, saved: saved}
	}
}
