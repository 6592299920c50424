// Package job runs the background work of a hive module: one-shot tasks
// with retries, timers and observers, each under its own health scope.
//
// A module asks for a Group (the hive provides one per module, tied to the
// module's Lifecycle and Health) and adds jobs to it:
//
//	cell.Invoke(func(g job.Group) { g.Add(job.OneShot("sync", sync)) })
//
// Invariants:
//
//   - Jobs added before the hive starts are started by a lifecycle hook
//     appended at the time of Add, so they start after everything that was
//     constructed before them (their dependencies) and stop before it.
//   - Jobs added while the hive runs start at once; they stop when the
//     group's own hook stops, which is after every job hook of the group.
//   - Jobs added after the group stopped are dropped (and logged).
//   - Every job runs in one goroutine owned by its hook (or its group). Stop
//     cancels the job's context and waits for the goroutine to return (up to
//     the stop deadline), so no goroutine outlives the hive.
//   - Every job has its own health scope, a child of the group's scope named
//     after the job; it is closed when the job's hook stops.
package job
