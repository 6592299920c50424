// Package sysctl is an example reconciler target, and the template to copy
// for a target of your own: desired kernel settings (sysctls such as
// net.ipv4.ip_forward) kept in a statedb table and written to /proc/sys.
//
// # Layout
//
// Every example target has the same files; this one has nothing else:
//
//	doc.go      what it manages, how it owns things, how to run it
//	errors.go   the sentinel errors
//	types.go    the object (Sysctl): fields, Validate, Clone, status accessors
//	table.go    the table's name and indexes (NameIndex, StatusIndex), NewTable
//	target.go   the Target (NewTarget): Update, Delete, Prune
//	plan.go     the Target's plan (reconciler.Planner): what an operation would change
//	watch.go    drift: what changed behind the target's back (reconciler.DriftTarget)
//	cell.go     ReconcilerConfig, and Cell: the table, target and reconciler as a hive module
//
// # What it manages and what it owns
//
// The target reads before it writes and skips a write that would change
// nothing, so a refresh of a converged system writes no file.
// Before its first change of a key it records the value it found (per
// key, in memory, and in TargetConfig.Originals when set: saved before the
// write, so a crash cannot lose it); Delete, and Prune for keys that are
// no longer desired, write that value back and then forget it. Keys the
// target never changed are never touched, so Prune cannot undo settings
// made by others. Without an OriginalStore a new target (after a restart)
// owns nothing until it changes a key; with one, it loads the originals an
// earlier target recorded at its first operation and restores them as its
// own.
//
// Every file access runs inside TargetConfig.NetNS (a path such as
// /var/run/netns/blue or /proc/PID/ns/net, or a name under /var/run/netns;
// "" is the process's own namespace), so net.* keys are those of that
// network namespace; keys outside net.* are global to the kernel whichever
// namespace is used (TargetConfig.NetworkOnly refuses them).
//
// The kernel does not say when a sysctl is written, so the target checks
// the keys it applied every TargetConfig.CheckInterval (5 seconds by
// default; one read of each key's file) and reports those that changed:
// the reconciler repairs them at once (see watch.go).
//
// Unknown keys, read-only keys and values the kernel rejects are terminal
// errors (reconciler.Terminal): the object goes to Error and is not retried
// until it changes.
//
// # Running it
//
// Without hive:
//
//	db := statedb.New()
//	table, _ := sysctl.NewTable(db)
//	target, _ := sysctl.NewTarget(sysctl.TargetConfig{NetNS: "blue"})
//	r, _ := reconciler.New(db, sysctl.ReconcilerConfig(table, target))
//	go r.Run(ctx)
//	// writers insert Sysctl objects with reconciler.StatusPending()
//
// With hive, include Cell and provide a TargetConfig (see Cell). Writing
// to /proc/sys needs root (CAP_NET_ADMIN in the namespace for net.*).
//
// # Copying it
//
// The package imports only public packages (the library, and
// examples/netnsutil for namespaces, which a copy may keep importing or
// replace), so it can be copied out of the repository. Keep: the layout of
// the files above, the names (NewTable, NewTarget, ReconcilerConfig, Cell,
// TargetConfig), the object's status accessors, Clone and Equal, Validate,
// the plan (read before write: a converged system costs no write), and
// the drift report. Change: the object's fields and its key (types.go,
// table.go), what Update, Delete and Prune do to the real system and how
// the target tells what it owns (target.go, plan.go), how drift is seen
// (watch.go: kernel notifications where there are any, a cheap check on an
// interval where not), and the errors.
package sysctl
