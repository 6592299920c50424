package sysctl

import "errors"

var (
	// ErrInvalid is wrapped by every error of Sysctl.Validate, and by the
	// (terminal) error of an operation on an invalid object.
	ErrInvalid = errors.New("invalid sysctl")

	// ErrNotNetwork is wrapped by the (terminal) error of a sysctl outside
	// net.* on a target with TargetConfig.NetworkOnly.
	ErrNotNetwork = errors.New("sysctl outside the network namespace")

	// ErrInvalidConfig is wrapped by NewTarget's error for a bad
	// TargetConfig.
	ErrInvalidConfig = errors.New("invalid sysctl target config")

	// errUnknownKey is wrapped by the (terminal) error of a key the kernel
	// does not have.
	errUnknownKey = errors.New("unknown sysctl")
)
