package job

import "errors"

var (
	// ErrInvalidJob is wrapped by the error of Group.Add for a job it
	// refuses: a nil Job, or a name that breaks the name rule
	// ([a-z][a-z0-9_-]{0,63}). The message names the module and the job.
	ErrInvalidJob = errors.New("invalid job")

	// ErrJobsNotStopped is wrapped by the error of a group's stop hook when
	// jobs did not return before the stop deadline because they ignore
	// their context; the message names them, and the hive's Stop wraps it
	// in hive.ErrStopTimeout. Those jobs are abandoned: their health scopes
	// are closed, and their goroutines keep running until their functions
	// return (see the package doc).
	ErrJobsNotStopped = errors.New("jobs did not stop in time")

	// ErrPanic is wrapped by the error of a job function that panicked.
	ErrPanic = errors.New("job panicked")
)
