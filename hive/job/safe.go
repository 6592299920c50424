package job

import (
	"fmt"
	"log/slog"
	"runtime/debug"
)

// safely calls fn and turns a panic into an error wrapping ErrPanic (with
// the stack in the log), so that a bug in one job degrades that job's
// health, and is retried like any failure, instead of crashing the program.
func safely(log *slog.Logger, job string, fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", ErrPanic, p)
			if log != nil {
				log.Error("Job panicked", "job", job, "panic", p, "stack", string(debug.Stack()))
			}
		}
	}()
	return fn()
}
