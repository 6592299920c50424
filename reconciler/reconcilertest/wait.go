package reconcilertest

import (
	"testing"
	"time"
)

// Timeout bounds every wait of this package. It is generous, for a loaded
// machine under the race detector; a healthy test never comes close.
// Inside a testing/synctest bubble it is fake time, so a wait for
// something that never comes fails at once.
const Timeout = 30 * time.Second

// notifier wakes waiters: watch returns a channel that wake closes. The
// owner holds its own mutex around both.
type notifier struct{ ch chan struct{} }

func (n *notifier) watch() <-chan struct{} {
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

func (n *notifier) wake() {
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
}

// waitUntil waits until cond holds. changed returns a channel that closes
// when cond's answer may change; it is taken before cond is evaluated, so
// no change is missed between the two. On timeout the failure names what
// was awaited and, if seen is not nil, what was seen instead.
func waitUntil(tb testing.TB, what string, seen func() string, changed func() <-chan struct{}, cond func() bool) {
	tb.Helper()
	timeout := time.NewTimer(Timeout)
	defer timeout.Stop()
	for {
		ch := changed()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-timeout.C:
			if seen != nil {
				what += "; saw " + seen()
			}
			tb.Fatalf("reconcilertest: timed out after %v waiting for %s", Timeout, what)
		}
	}
}
