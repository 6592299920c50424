// Package health keeps the hive's health tree: one scope per module, job
// and sub-component, each OK, Degraded (with reason and last error),
// Stopped or Unknown. The hive gives each module its scope (Tree.Module)
// and provides it to the module's cells as cell.Health; jobs and
// components open child scopes with NewScope. The tree serves the hive's
// /healthz as JSON (Status), its text form (Status.WriteText), and the
// metric steadystate_health_scopes{module, level} (the Tree is a
// prometheus.Collector).
//
// Invariants:
//
//   - One mutex (the Tree's) guards every scope, so a Snapshot is a
//     consistent picture of the whole tree.
//   - Sibling scopes never share a name: NewScope suffixes "#2", "#3", ...
//     Scope ids are the dotted path of names below the root.
//   - A closed scope is gone from the tree and ignores further updates;
//     closing a scope closes its children.
//   - A scope's level (in Status, /healthz and the metric) is its
//     effective level: the worst of its own report and its children's
//     effective levels, in the order Degraded, Unknown, OK, Stopped. A
//     Degraded reconciler under a job that reports "OK running" thus shows
//     Degraded at the job, its module and the root; a scope that never
//     reported itself shows its children's worst (Unknown without
//     children). Each scope's own report stays in its Message and Error.
//   - Unknown is never healthy: /healthz answers 200 only when the root
//     is OK. A scope that should not count while its part is off reports
//     OK (saying it is off) or is not opened at all.
//   - While the hive starts (Starting until Started) the root reads
//     Unknown "starting", and from Stopping on it reads Stopped
//     "stopping", unless something is Degraded: a half-started program is
//     never reported healthy, even if every scope opened so far is OK.
package health
