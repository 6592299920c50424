// Package iptables is an example reconciler target: desired iptables rules
// kept in a statedb table and applied with iptables-restore.
//
// # Ownership
//
// The target owns the chains named "<prefix>-<built-in chain>" (prefix
// STEADYSTATE by default), in every table: a Rule with Table "filter" and
// Chain "INPUT" lives in filter's STEADYSTATE-INPUT. Each owned chain is
// hooked from its built-in chain by one jump rule, inserted at the top and
// marked with the comment HookComment. Every rule in an owned chain is the
// target's by definition, and nothing else is ever changed: not foreign
// rules in the built-in chains, not other chains.
//
// # Recognizing its rules
//
// Rules are written as given, without a mark of their own (a comment per
// rule would cost iptables-restore about a third of its time). Instead the
// target records what it wrote into each owned chain, in order: each
// rule's name and canonical spec, and the rule's text as iptables-save
// shows it, learned the first time the target reads the chain after
// writing the rule (the next batch on that chain or the next Prune; it
// never reads back just to learn). When the chain still holds as many
// rules as the record and every learned text is at its place, the rules
// are identified by position and the missing texts are learned; otherwise
// only rules whose learned text appears are identified, and every other
// rule (a stray, a rule changed behind the target's back, a rule written
// since the last read) is deleted and written again. A target without a
// record (after a restart) identifies nothing, so it rewrites a chain
// whole the first time it touches it: atomically, in one
// iptables-restore, so packets never see the chain half-filled.
//
// A rule changed in place behind the target's back before the target has
// read its chain once since writing it is taken as written: its text is
// learned as it is found, and that change is not repaired until the
// rule's spec changes or the target restarts.
//
// # Applying
//
// The target implements reconciler.BatchTarget. A batch (a reconciler
// round) reads the tables it touches with iptables-save, computes for each
// touched chain the edits that turn its rules into the desired ones (the
// chain's rules in the reconciler's snapshot, ordered by Priority then
// Name), and applies them in one iptables-restore --noflush: atomic, so
// packets never see a half-applied round. Rules already in place stay
// where they are; only missing, changed or misplaced rules are deleted and
// inserted; a chain of which no rule stays is flushed and written whole. A
// chain whose last desired rule goes away is unhooked and deleted. When
// iptables-restore rejects a rule, the line it names is pinned on that
// rule (a terminal error in its status) and the batch is applied again
// without it.
//
// # Pruning
//
// Prune (in a full reconciliation) brings every owned chain that exists
// to its desired content in one iptables-restore: rules that are not
// desired, duplicates, strays and changed rules are deleted, missing ones
// put back; owned chains that have no desired rules are removed, with
// their hooks. The full reconciliation's refresh then finds the chains in
// place (and creates those that did not exist).
//
// Wiring:
//
//	table, _ := iptables.NewTable(db)
//	target, _ := iptables.NewTarget(iptables.TargetConfig{NetNS: ns, Rules: table})
//	r, _ := reconciler.New(db, iptables.ReconcilerConfig(table, target))
//	go r.Run(ctx)
package iptables
