// Package iptables is an example reconciler target: desired iptables rules
// kept in a statedb table and applied with iptables-restore.
//
// It has the layout of every example target (see package sysctl, the
// template), plus its own optimisation:
//
//	doc.go       what it manages, how it owns things, how to run it
//	errors.go    the sentinel errors
//	types.go     the object (Rule): fields, Validate, spec parsing
//	table.go     the table's name and indexes, NewTable
//	target.go    the Target (NewTarget): batches, Update, Delete, Prune
//	plan.go      the Target's plan (reconciler.Planner, BatchPlanner)
//	watch.go     drift: nf_tables notifications, or a check on legacy (reconciler.DriftTarget)
//	ownfilter.go the watch and the target's own restores: out of the group, or filtered
//	nfgen.go     the ruleset's generation, which tells what the watch did not hear
//	cell.go      ReconcilerConfig, and Cell (a hive module)
//	learn.go     how iptables shows the desired rules, learned for plans
//	save.go      reading iptables-save output
//	restore.go   the edits of a chain, as iptables-restore input
//	record.go    how the target recognizes its own rules
//	texts.go     how iptables shows them, kept across restarts (TextStore)
//	commands.go  running iptables-save and iptables-restore in the namespace
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
// record of a chain that has rules (after a restart) identifies them by
// how iptables shows the chain's desired rules: texts an earlier target
// saved in the TextStore (TargetConfig.Texts), or learned as a plan
// learns them (see Plans). A restart over chains already as desired thus
// writes nothing (handles and counters stay), and only rules changed
// meanwhile are written again. Where nothing is saved or can be learned
// (no scratch namespace), it identifies nothing and rewrites the chain
// whole the first time it touches it: atomically, in one
// iptables-restore, so packets never see the chain half-filled.
//
// A rule changed in place behind the target's back before the target has
// read its chain once since writing it is taken as written: its text is
// learned as it is found, and that change is not repaired until the
// rule's spec changes or the target restarts; unless a plan (see below)
// learned the rule's text meanwhile, in which case the change is seen.
//
// # Plans
//
// The target is a reconciler.Planner (plan.go). A plan recognizes rules by
// content, without a record: it learns how iptables-save shows each
// desired rule by writing the rules, hooked as the target hooks them, in a
// scratch network namespace of its own, never in the managed one
// (learn.go). So a new target, in a new process (`agent diff`), plans an
// applied state as empty, and the texts a plan learned fill the gaps of the
// record. A rule that needs something only the managed namespace has (an
// ipset, say) cannot be learned there: its plan fails.
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
// Prune (by the reconciler's FullReconciliationInterval, or asked with
// Reconciler.Prune) brings every owned chain that exists to its desired
// content in one iptables-restore: rules that are not desired, duplicates,
// strays and changed rules are deleted, missing ones put back; owned chains
// that have no desired rules are removed, with their hooks. Its plan
// (PlanPrune) lists all of it, so a reconciler skips a Prune only when
// there is nothing to do; what it puts back is marked Repair (drift
// repaired, not a leftover pruned). Owned chains deleted by hand are
// recreated by the Updates of the checks that the watch asks for (below),
// or of the refresh by age (the reconciler's RefreshInterval).
//
// # Drift
//
// On the nf_tables backend (iptables-nft, Debian's default), iptables
// writes nf_tables, which notifies every change: the target reads those
// notifications in its namespace and reports the chains it owns that
// another program changed (their rules, their hooks, their table), so
// that the reconciler checks their rules (one iptables-save per table)
// and repairs them at once. Its own changes are not heard: while its
// iptables-restore of one table runs, the watch's socket leaves the
// notification group (nf_tables then builds no notification), and the
// ruleset's generation, read before and after, tells whether another
// program changed anything meanwhile (then every owned chain is
// checked); a restore of several tables is filtered out in the kernel
// instead, by its process ID (or, if that cannot tell them, after
// decoding). Everything it does not own is dropped after decoding. On
// the legacy backend, which notifies nothing, it reads its chains every
// TargetConfig.CheckInterval (10 seconds by default; one iptables-save)
// instead. See watch.go; TargetConfig.DisableWatch turns it off.
//
// # Running it
//
// Without hive:
//
//	db := statedb.New()
//	table, _ := iptables.NewTable(db)
//	target, _ := iptables.NewTarget(iptables.TargetConfig{NetNS: "blue", Rules: table})
//	r, _ := reconciler.New(db, iptables.ReconcilerConfig(table, target))
//	go r.Run(ctx)
//	// writers insert Rule objects with reconciler.StatusPending()
//
// With hive, include Cell and provide a TargetConfig. TargetConfig.NetNS
// is a path (/var/run/netns/blue, /proc/PID/ns/net), a name under
// /var/run/netns, or "" for the process's own namespace. It needs root and
// the iptables commands (iptables-save, iptables-restore).
package iptables
