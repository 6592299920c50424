package job

import "errors"

// ErrJobsNotStopped is returned by a group's stop hook when jobs did not
// return before the stop deadline (they ignore their context). Their
// goroutines are then left running.
var ErrJobsNotStopped = errors.New("jobs did not stop in time")
