package iptables

import "errors"

var (
	// ErrInvalid is wrapped by every error of Rule.Validate, and by the
	// (terminal) error of an operation on an invalid rule.
	ErrInvalid = errors.New("invalid iptables rule")

	// ErrInvalidConfig is wrapped by NewTarget's error for a bad
	// TargetConfig.
	ErrInvalidConfig = errors.New("invalid iptables target config")

	// errNoSnapshot is the result of a batch without a ReadTxn.
	errNoSnapshot = errors.New("iptables target: a ReadTxn of the rules table is required")
)
