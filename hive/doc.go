// Package hive assembles an application from cells (see package cell) and
// runs it: it builds the object graph with go.uber.org/dig, takes settings
// from flags and environment variables, starts lifecycle hooks in
// dependency order, stops them in reverse, and offers a cobra command.
//
// Every hive provides, besides what its cells provide:
//
//   - per module: a *slog.Logger tagged module=<id>, a cell.Health scope in
//     the health tree, a cell.Lifecycle that names hooks after the module,
//     a job.Group whose jobs report under the module's health scope, and
//     cell.ModuleID / cell.FullModuleID;
//   - for all: *health.Tree, job.Registry, cell.Shutdowner, and one
//     *prometheus.Registry (also as prometheus.Registerer and
//     prometheus.Gatherer) that belongs to this hive alone.
//
// Invariants:
//
//   - Populate runs at most once; Start and Stop call it if needed. A hive
//     starts at most once: after Stop it cannot be started again.
//   - Hooks start in the order they were appended, which is construction
//     order, so a hook starts after the hooks of its dependencies. If a hook
//     fails to start, the hooks already started are stopped in reverse and
//     Start returns the error naming the hook (module and function).
//   - Stop runs the Stop of every started hook in reverse order, even after
//     one fails or the deadline passes, and joins their errors.
//   - Start and Stop give hooks a context with the start or stop deadline
//     (Options.StartTimeout, Options.StopTimeout). Hooks must return
//     promptly when it is done; the hive never abandons a running hook, so
//     it never leaves a goroutine behind.
//   - Precedence of settings: flag on the command line, then environment
//     variable PREFIX_FLAG_NAME (when a prefix is set), then the config's
//     default.
//   - Start, Stop and Run must not be called concurrently with each other;
//     Shutdown may be called from anywhere, at any time.
package hive
