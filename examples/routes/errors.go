package routes

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

var (
	// ErrForeignRoute is the error of an Update whose route's identity
	// (table, prefix, metric) is taken in the kernel by a route of another
	// protocol. The target never overwrites a route it does not own; the
	// object stays in Error and is retried, so it applies once the other
	// route is gone.
	ErrForeignRoute = errors.New("a route with this table, prefix and metric belongs to another protocol")

	// ErrDeviceNotFound is the error of an Update whose Dev does not exist
	// in the namespace. It is not terminal: the device may appear later.
	ErrDeviceNotFound = errors.New("device not found")

	// ErrTargetClosed is the error of every operation on a closed Target.
	ErrTargetClosed = errors.New("routes target is closed")

	// ErrInvalidConfig is wrapped by NewTarget's error for a bad
	// TargetConfig.
	ErrInvalidConfig = errors.New("invalid routes target config")
)

// kernelError wraps err, an error of the kernel for route r, with what the
// target was doing and, for the common errnos, a hint at the cause. No
// kernel error is terminal: each can go away without r changing (a device
// or an address appears, a foreign route is removed), so the reconciler
// retries it with its capped backoff.
func kernelError(op string, r *Route, err error) error {
	hint := ""
	var errno unix.Errno
	if errors.As(err, &errno) {
		switch errno {
		case unix.ENETUNREACH:
			hint = " (the next hop is not on a connected network)"
		case unix.ENODEV:
			hint = " (no such device)"
		case unix.EPERM, unix.EACCES:
			hint = " (managing routes needs CAP_NET_ADMIN)"
		case unix.EINVAL:
			hint = " (the kernel rejected the route's combination of fields)"
		}
	}
	return fmt.Errorf("%s route %s: %w%s", op, r, err, hint)
}
