// Package iptables is an example reconciler target: desired iptables rules
// kept in a statedb table and applied with iptables-restore.
//
// # Ownership
//
// The target owns the chains named "<prefix>-<built-in chain>" (prefix
// STEADYSTATE by default), in every table: a Rule with Table "filter" and
// Chain "INPUT" lives in filter's STEADYSTATE-INPUT. Each owned chain is
// hooked from its built-in chain by one jump rule, inserted at the top and
// marked with the comment HookComment. Each rule carries the comment
// "<name>/<hash>", the rule's Name and a hash of its Spec: that is how the
// target recognizes its rules in iptables-save output and sees that one
// was changed behind its back. Nothing else is ever changed: not foreign
// rules in the built-in chains, not other chains.
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
// inserted. A chain whose last desired rule goes away is unhooked and
// deleted. When iptables-restore rejects a rule, the line it names is
// pinned on that rule (a terminal error in its status) and the batch is
// applied again without it.
//
// # Pruning
//
// Prune (in a full reconciliation) deletes from owned chains the rules
// whose name is not desired, duplicates and rules without the target's
// comment, and removes owned chains that have no desired rules, with their
// hooks. The full reconciliation's refresh then puts back missing or
// changed rules.
//
// Wiring:
//
//	table, _ := iptables.NewTable(db)
//	target, _ := iptables.NewTarget(iptables.TargetConfig{NetNS: ns, Rules: table})
//	r, _ := reconciler.New(db, iptables.ReconcilerConfig(table, target))
//	go r.Run(ctx)
package iptables
