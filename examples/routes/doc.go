// Package routes is an example reconciler target: desired kernel routes
// kept in a statedb table (TableName, PrimaryIndex, StatusIndex) and
// applied over rtnetlink (through github.com/vishvananda/netlink) in one
// network namespace.
//
// It has the layout of every example target (see package sysctl, the
// template), plus its own optimisation:
//
//	doc.go       what it manages, how it owns things, how to run it
//	errors.go    the sentinel errors
//	types.go     the object (Route) and its identity (RouteKey)
//	table.go     the table's name and indexes, NewTable
//	target.go    the Target (NewTarget): Update, Delete, Prune
//	plan.go      the Target's plan (reconciler.Planner, BatchPlanner)
//	cell.go      ReconcilerConfig, and Cell (a hive module)
//	kernel.go    batches (reconciler.BatchTarget) and reads of the kernel's routes
//	dump.go      route listings decoded lean: only the routes selected, only what is compared
//	pipeline.go  route changes sent many per write, without a wait per route
//	watch.go     route and link notifications: drift reported (reconciler.DriftTarget)
//	notify.go    route notifications read lean, the target's own dropped in the kernel
//
// # Running it
//
// Without hive:
//
//	db := statedb.New()
//	table, _ := routes.NewTable(db)
//	target, _ := routes.NewTarget(routes.TargetConfig{NetNS: "blue"})
//	defer target.Close()
//	r, _ := reconciler.New(db, routes.ReconcilerConfig(table, target))
//	go r.Run(ctx)
//	// writers insert Route objects with reconciler.StatusPending()
//
// With hive, include Cell and provide a TargetConfig. TargetConfig.NetNS
// is a path (/var/run/netns/blue, /proc/PID/ns/net), a name under
// /var/run/netns, or "" for the process's own namespace. Managing routes
// needs CAP_NET_ADMIN in that namespace.
//
// # Identity
//
// The kernel identifies a route by its table, prefix and metric (and TOS,
// which is always 0 here); RouteKey is that identity and the primary index
// is unique on it. Table 0 is read as the main table (254) and, for IPv6,
// metric 0 as 1024, as the kernel reads them, so two spellings of one
// kernel route are one object. A change of next hop, device or type keeps
// the identity (the route is replaced); a change of table, prefix or metric
// is another route (delete the old object and insert the new one).
//
// # Ownership
//
// Every route the target installs carries its protocol number
// (TargetConfig.Protocol, default DefaultProtocol). The target never
// changes or deletes a route of another protocol: Update refuses with
// ErrForeignRoute when another protocol's route has the identity, Delete
// and Prune delete only routes of its protocol. Two programs (or two
// agents) must therefore not share a protocol number.
//
// # Drift
//
// The target listens to its namespace's route and link notifications (see
// watch.go) and reports the routes that may have changed behind its back,
// so that the reconciler repairs a route deleted or changed by hand at
// once, reports a foreign route that takes a desired route's identity as
// that object's Error at once, and retries a route that waits for its
// device as soon as the link appears or comes up. The reconciler's refresh
// by age (RefreshInterval) is then only a backstop.
// TargetConfig.DisableWatch turns the watch off.
//
// # Errors
//
// A Route that fails Validate is a terminal error: it is not retried until
// it changes. Every kernel error is retried with the reconciler's backoff,
// because each can go away by itself: an unknown device (ENODEV,
// ErrDeviceNotFound) may appear, an unreachable next hop (ENETUNREACH) may
// become reachable when an address is added, a foreign route may be
// removed, the namespace may be created. The watch has them retried at
// once when their link appears or comes up, a connected route appears, or
// the foreign route goes.
package routes
