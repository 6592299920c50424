// Package job runs the background work of a hive module: one-shot tasks
// with retries, timers and observers, each under its own health scope.
//
// A module asks for a Group (the hive provides one per module, tied to the
// module's Lifecycle and Health) and adds jobs to it:
//
//	cell.Invoke(func(g job.Group) error { return g.Add(job.OneShot("sync", sync)) })
//
// Job names follow the one name rule of the project, the same as module
// ids: [a-z][a-z0-9_-]{0,63}. Add refuses a bad name with ErrInvalidJob.
//
// Invariants:
//
//   - Jobs added before the hive starts are started by a lifecycle hook
//     appended at the time of Add, so they start after everything that was
//     constructed before them (their dependencies) and stop before it.
//   - Jobs added while the hive runs start at once; they stop when the
//     group's own hook stops, which is after every job hook of the group.
//   - Jobs added after the group stopped are dropped (and logged).
//   - Every job runs in one goroutine owned by its hook (or its group).
//     Stop cancels the job's context and waits for the goroutine to return,
//     until the stop deadline (hive.Options.StopTimeout). A job that returns
//     when its context is cancelled therefore never outlives its hive.
//   - A job that ignores its context past the stop deadline is abandoned:
//     the stop hook returns at the deadline with an error wrapping
//     ErrJobsNotStopped that names the job (hive.Stop wraps it in
//     hive.ErrStopTimeout and goes on stopping the other hooks), the job's
//     health scope is closed so its later reports are dropped, and its
//     goroutine keeps running until its function returns. Nothing waits for
//     it any more; a program that exits ends it.
//   - Every job has its own health scope, a child of the group's scope named
//     after the job; it is closed when the job's hook stops.
//   - Retries wait the project's one backoff (the reconciler's too):
//     doubling from a minimum up to a maximum, with up to a quarter of
//     jitter; see WithRetry.
package job
