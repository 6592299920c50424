package reconciler

import (
	"errors"
	"fmt"
)

// Sentinel errors; match with errors.Is. Each error that wraps one names
// the reconciler (Config.Name) it concerns.
var (
	// ErrInvalidConfig is wrapped by the error New returns for a bad
	// Config; the error lists every problem.
	ErrInvalidConfig = errors.New("invalid reconciler config")

	// ErrNotAllReconciled is wrapped by WaitUntilReconciled's error when
	// the revision was reached but some objects failed their latest
	// attempt.
	ErrNotAllReconciled = errors.New("not all objects reconciled")
)

// terminalError marks an error that retrying cannot fix.
type terminalError struct{ err error }

func (e terminalError) Error() string { return e.err.Error() }
func (e terminalError) Unwrap() error { return e.err }

// Terminal marks err as terminal: a target returns it for an object that
// cannot be applied as it is (an invalid value, an unknown key). The object
// goes to Error and is not retried until it changes. Deletes are retried
// regardless, so that no delete is ever lost.
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return terminalError{err}
}

// IsTerminal reports whether err (or an error it wraps) was marked with
// Terminal.
func IsTerminal(err error) bool {
	var t terminalError
	return errors.As(err, &t)
}

// panicError is the error of a target operation that panicked.
type panicError struct {
	value any
}

func (e panicError) Error() string { return fmt.Sprintf("target panicked: %v", e.value) }
