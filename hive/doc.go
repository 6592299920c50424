// Package hive assembles an application from cells (see package cell) and
// runs it: it builds the object graph with go.uber.org/dig, takes settings
// from flags and environment variables, starts lifecycle hooks in
// dependency order, stops them in reverse, and offers a cobra command.
//
// Every hive provides, besides what its cells provide:
//
//   - per module (and at the root): a *slog.Logger tagged module=<full id>,
//     a cell.Health scope in the health tree, a cell.Lifecycle that names
//     hooks after the module, a job.Group whose jobs report under the
//     module's health scope, and cell.ModuleID / cell.FullModuleID;
//   - for all: *health.Tree, cell.Shutdowner, and one *prometheus.Registry
//     (also as prometheus.Registerer and prometheus.Gatherer) that belongs
//     to this hive alone, with the Go and process collectors and the health
//     tree's steadystate_health_scopes registered.
//
// Package hivetest runs a hive inside a test.
//
// Invariants:
//
//   - Populate runs at most once; Start calls it if needed, Stop never does.
//     A hive starts at most once: after Stop it cannot be started again.
//   - Hooks start in the order they were appended, which is construction
//     order, so a hook starts after the hooks of its dependencies. If a hook
//     fails to start, the hooks already started are stopped in reverse and
//     Start returns the error naming the hook (module and function).
//   - The health tree's root reads Unknown "starting" from the start of
//     Start until every hook started, and Stopped "stopping" from Stop on
//     (see health.Tree.Starting), so /healthz (200 only when the root is
//     OK) is 503 until the hive is fully started and once it stops.
//   - Stop runs the Stop of every started hook in reverse order, even after
//     one fails or the deadline passes, and joins their errors.
//   - Start and Stop give hooks a context with the start or stop deadline
//     (Options.StartTimeout, Options.StopTimeout). The hive never abandons
//     a hook: it waits for each Start and Stop to return, so hooks must
//     return promptly once their context is done. The hooks of job groups
//     do: they wait for their jobs until the deadline and then abandon the
//     jobs that ignore their context (see package job), so a job that
//     returns when its context is cancelled never outlives the hive.
//   - Precedence of settings: flag on the command line, then environment
//     variable PREFIX_FLAG_NAME (when Options.EnvPrefix is set), then the
//     config's default.
//   - Start, Stop and Run must not be called concurrently with each other;
//     Shutdown may be called from anywhere, at any time.
package hive
