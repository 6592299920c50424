package reconciler

import (
	"sync/atomic"
	"time"
)

// StatusKind is where an object is in its reconciliation.
type StatusKind uint8

const (
	// StatusKindUnset is the zero value: the object was never given a
	// status. The reconciler does not act on it.
	StatusKindUnset StatusKind = iota
	// StatusKindPending: the object was written and waits to be applied.
	StatusKindPending
	// StatusKindRefreshing: the object is unchanged but should be applied
	// again (for example because the real system may have drifted).
	StatusKindRefreshing
	// StatusKindDone: the object was applied successfully.
	StatusKindDone
	// StatusKindError: the last attempt failed; see Status.Error.
	StatusKindError
)

var statusKindNames = [...]string{"", "Pending", "Refreshing", "Done", "Error"}

// String returns "", "Pending", "Refreshing", "Done" or "Error".
func (k StatusKind) String() string {
	if int(k) < len(statusKindNames) {
		return statusKindNames[k]
	}
	return "Unknown"
}

// Status is the reconciliation status kept in each desired object.
//
// ID is the identity of the desired version the status is about. Every
// Pending or Refreshing status made by StatusPending, StatusRefreshing or
// StatusSet.Pending gets a new ID; the reconciler keeps it in the Done or
// Error status it writes back. A reconciler writes its result only while
// the object's status still carries the ID it worked on: then the desired
// state it applied is still current, whatever else (other reconcilers'
// statuses) changed in the object meanwhile. A status without ID (zero)
// falls back to the revision: the result is written only if the object is
// unchanged since it was read.
type Status struct {
	Kind      StatusKind `json:"kind" yaml:"kind"`
	UpdatedAt time.Time  `json:"updatedAt,omitzero" yaml:"updatedAt,omitempty"`
	Error     string     `json:"error,omitempty" yaml:"error,omitempty"`
	ID        uint64     `json:"id,omitempty" yaml:"id,omitempty"`
}

// statusIDs hands out the IDs of pending statuses, process-wide.
var statusIDs atomic.Uint64

func nextStatusID() uint64 { return statusIDs.Add(1) }

// StatusPending returns a Pending status with a new ID: what a writer sets
// on every object it inserts or changes.
func StatusPending() Status {
	return Status{Kind: StatusKindPending, UpdatedAt: time.Now(), ID: nextStatusID()}
}

// StatusRefreshing returns a Refreshing status with a new ID: set it to
// have an unchanged object applied again.
func StatusRefreshing() Status {
	return Status{Kind: StatusKindRefreshing, UpdatedAt: time.Now(), ID: nextStatusID()}
}

// StatusDone returns a Done status (without ID: the reconciler's own Done
// keeps the ID of the version it applied).
func StatusDone() Status { return Status{Kind: StatusKindDone, UpdatedAt: time.Now()} }

// StatusError returns an Error status with err's message; a nil err gives
// the message "unknown error".
func StatusError(err error) Status {
	msg := "unknown error"
	if err != nil {
		msg = err.Error()
	}
	return Status{Kind: StatusKindError, UpdatedAt: time.Now(), Error: msg}
}

// IsPending reports whether the reconciler must act on an object with this
// status (Pending or Refreshing).
func (s Status) IsPending() bool {
	return s.Kind == StatusKindPending || s.Kind == StatusKindRefreshing
}

// String returns the kind, with the error for Error.
func (s Status) String() string {
	if s.Kind == StatusKindError {
		return "Error: " + s.Error
	}
	return s.Kind.String()
}

// result returns the status that reports the outcome err of applying the
// version of s: Done, or Error with err's message, keeping s's ID.
func (s Status) result(now time.Time, err error) Status {
	if err == nil {
		return Status{Kind: StatusKindDone, UpdatedAt: now, ID: s.ID}
	}
	return Status{Kind: StatusKindError, UpdatedAt: now, Error: err.Error(), ID: s.ID}
}
