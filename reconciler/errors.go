package reconciler

import (
	"errors"
	"fmt"

	"github.com/steadystate/steadystate/statedb"
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

	// ErrNoPlanner is wrapped by DryRun's error when the target does not
	// implement Planner.
	ErrNoPlanner = errors.New("target has no plan (does not implement reconciler.Planner)")

	// ErrOperationAbandoned is wrapped by the error of a target operation
	// that did not return within Config.OperationTimeout although its
	// context was cancelled: the reconciler stopped waiting for it. Its
	// goroutine runs on until the target returns (see
	// Config.OperationTimeout).
	ErrOperationAbandoned = errors.New("target operation abandoned")

	// ErrKeyBusy is wrapped by the error of an object whose previous
	// operation (or a Prune) was abandoned and has not returned yet: no
	// second operation on the same key starts meanwhile.
	ErrKeyBusy = errors.New("previous operation on the object still running")
)

// NotReconciledError is WaitUntilReconciled's error when the revision was
// reached but some objects failed their latest attempt. It wraps
// ErrNotAllReconciled; match it with errors.As.
type NotReconciledError struct {
	Reconciler string // Config.Name
	// Failing is the number of objects whose latest attempt failed (failed
	// deletes included).
	Failing int
	// LowestRetryRevision is the lowest revision of an object waiting for
	// a retry (0 when only terminal failures remain): once the reconciler
	// has reached past it with no failures, everything up to it is applied.
	LowestRetryRevision statedb.Revision
}

func (e *NotReconciledError) Error() string {
	return fmt.Sprintf("reconciler %q: %v: %d objects failing (see their status)", e.Reconciler, ErrNotAllReconciled, e.Failing)
}

// Unwrap returns ErrNotAllReconciled.
func (e *NotReconciledError) Unwrap() error { return ErrNotAllReconciled }

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
