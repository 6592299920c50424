// Package sysctl is an example reconciler target: desired kernel settings
// (sysctls such as net.ipv4.ip_forward) kept in a statedb table and written
// to /proc/sys.
//
// The target reads before it writes and skips a write that would change
// nothing, so a full reconciliation of a converged system writes no file.
// Before its first change of a key it records the value it found (in
// memory, per key); Delete, and Prune for keys that are no longer desired,
// write that value back and forget it. Keys the target never changed are
// never touched, so Prune cannot undo settings made by others.
//
// Every file access runs inside TargetConfig.NetNS, so net.* keys are those
// of that network namespace; keys outside net.* are global to the kernel
// whichever namespace is used.
//
// Unknown keys, read-only keys and values the kernel rejects are terminal
// errors (reconciler.Terminal): the object goes to Error and is not retried
// until it changes.
//
// Wiring:
//
//	table, _ := sysctl.NewTable(db)
//	target := sysctl.NewTarget(sysctl.TargetConfig{NetNS: ns})
//	r, _ := reconciler.New(db, sysctl.ReconcilerConfig(table, target))
//	go r.Run(ctx)
package sysctl
