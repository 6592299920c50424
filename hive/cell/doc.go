// Package cell defines the building blocks of a hive application: modules,
// constructors, invocations, decorators, configuration, lifecycle hooks and
// health scopes. It is what a package that contributes to an application
// imports; package hive assembles the cells and runs them.
//
// A program is a tree of cells. Module groups cells under an id and gives
// them a private scope; Provide and ProvidePrivate register constructors;
// Invoke registers functions that are called once the graph is complete;
// Decorate wraps values for a subtree; Config turns a struct that declares
// its flags into a value in the graph; Group bundles cells; When builds
// cells only in the mode a config chooses. Constructors
// and invoke functions take their dependencies as parameters, one per type
// or bundled in a struct that embeds In; a constructor may return several
// values bundled in a struct that embeds Out.
//
//	var Cell = cell.Module("routes", "Keeps the routes in line",
//		cell.Config(Config{Interval: time.Minute}),
//		cell.ProvidePrivate(newTarget),
//		cell.Invoke(func(g job.Group, t *Target, cfg Config) error {
//			return g.Add(job.Timer("sync", t.Sync, cfg.Interval))
//		}),
//	)
//
// Invariants:
//
//   - Cells are immutable values; one cell may be used in many hives. All
//     per-hive state lives in the hive, never in a cell.
//   - Every constructor and invoke function runs at most once per hive, and
//     only while the hive is populated (Hive.Populate). Constructors run in
//     dependency order, so lifecycle hooks that constructors append are in
//     dependency order too: a hook is appended after the hooks of everything
//     it depends on.
//   - Provide makes a type visible to the whole hive; ProvidePrivate only to
//     the module that holds it and that module's sub-modules. Values that are
//     per module (ModuleID, FullModuleID, and what the hive adds: the
//     *slog.Logger, the Health scope, the Lifecycle and the job.Group) are
//     provided privately in every module.
//   - Bad input is an error from Populate, never a panic: an invalid module
//     id, a nil cell, a missing or duplicate type, an unknown or badly formed
//     flag value, a config that fails its Validate method. Errors wrap the
//     sentinels of this package and name the module ("module a.b: ...") and
//     the function or flag concerned.
package cell
