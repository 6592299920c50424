// Package cell defines the building blocks of a hive application: modules,
// constructors, invocations, decorators, configuration, lifecycle hooks and
// health scopes.
//
// A program is a tree of cells. Module groups cells under an id and gives
// them a private scope; Provide and ProvidePrivate register constructors;
// Invoke registers functions that are called once the graph is complete;
// Decorate wraps values for a subtree; Config turns a struct that declares
// its flags into a value in the graph. The hive package assembles the tree
// with Build and runs it.
//
// Invariants:
//
//   - Cells are immutable values; one cell may be used in many hives. All
//     per-hive state lives in the dig container and the flag set given to
//     Build, never in a cell.
//   - Every constructor and invoke function runs at most once per hive, and
//     only during Build (Hive.Populate). Constructors run in dependency
//     order, so lifecycle hooks that constructors append are in dependency
//     order too: a hook is appended after the hooks of everything it depends
//     on.
//   - Provide makes a type visible to the whole hive; ProvidePrivate only to
//     the module that holds it and that module's sub-modules. Values that are
//     per module (ModuleID, FullModuleID and what the runtime passes in
//     BuildOptions.ModuleProviders, such as the logger, the Health scope and
//     the Lifecycle) are provided privately in every module.
//   - Bad input is an error from Build, never a panic: an invalid module id,
//     a missing or duplicate type, an unknown or badly formed flag value, a
//     config that fails its Validate method. Errors name the module
//     ("module a.b: ...") and the function or flag concerned.
package cell
