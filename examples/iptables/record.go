package iptables

// The target's record of its chains. Rules carry no mark of their own
// (a comment per rule costs iptables-restore about a third of its time),
// so the target remembers what it wrote into each owned chain, in order,
// and recognizes its rules in iptables-save output by their text.

// chainRule is a rule of an owned chain as the target knows it.
type chainRule struct {
	name string // the desired rule's Name; "" when the rule is not identified
	args string // the canonical spec it was written with
	// text is the rule as iptables-save shows it (after "-A <chain> "):
	// "" from the write until the first read of the chain after it.
	text string
}

// recordKey names an owned chain in Target.written.
type recordKey struct{ table, owned string }

// identify names the rules of an owned chain, given as iptables-save
// shows them (texts, in order), from rec: what the target last wrote
// there, with the texts it has learned.
//
// When the chain has as many rules as rec and each learned text is at its
// place, the chain is as written: every rule is identified by its
// position, and the texts not learned yet are learned from it. Otherwise
// rules are identified by learned text only (each text of rec once); the
// rest (strays, rules changed behind the target's back, and rules whose
// text was not learned yet) are left unidentified, to be deleted and
// written again. Without a record (a new target) nothing is identified.
func identify(rec []chainRule, texts []string) []chainRule {
	out := make([]chainRule, len(texts))
	if len(rec) == len(texts) && len(rec) > 0 {
		asWritten := true
		for i, r := range rec {
			if r.text != "" && r.text != texts[i] {
				asWritten = false
				break
			}
		}
		if asWritten {
			for i, r := range rec {
				r.text = texts[i]
				out[i] = r
			}
			return out
		}
	}
	byText := make(map[string][]int, len(rec))
	for i, r := range rec {
		if r.text != "" {
			byText[r.text] = append(byText[r.text], i)
		}
	}
	for i, text := range texts {
		out[i] = chainRule{text: text}
		if q := byText[text]; len(q) > 0 {
			out[i] = rec[q[0]]
			byText[text] = q[1:]
		}
	}
	return out
}

// learnedRecord returns the record of an owned chain with the texts not
// learned from the chain yet filled in from those a plan learned (see
// learn.go), so that a rule changed behind the target's back right after
// it was written is recognized as changed once the target has planned it.
// t.mu is held.
func (t *Target) learnedRecord(table, owned string) []chainRule {
	rec := t.written[recordKey{table, owned}]
	for i := range rec {
		if rec[i].text == "" {
			if l := t.texts[textKey{table, owned, rec[i].args}]; l.text != "" {
				rec[i].text = l.text
			}
		}
	}
	return rec
}
