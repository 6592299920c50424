package hive

import "errors"

var (
	// ErrStartFailed wraps the error of the first hook whose Start failed;
	// the message names the hook.
	ErrStartFailed = errors.New("start failed")

	// ErrStopFailed wraps the error of a hook whose Stop failed; the
	// message names the hook.
	ErrStopFailed = errors.New("stop failed")

	// ErrStartTimeout is returned by Start when the start deadline passed
	// before every hook started; the message names the hook that was
	// running or next in line.
	ErrStartTimeout = errors.New("start timed out")

	// ErrStopTimeout wraps the error of a hook that failed to stop after the
	// stop deadline passed.
	ErrStopTimeout = errors.New("stop timed out")

	// ErrAlreadyStarted is returned by Start on a hive that was started
	// before (a hive starts at most once).
	ErrAlreadyStarted = errors.New("hive already started")
)
