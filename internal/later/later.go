// Package later runs work that a program's start leaves for afterwards:
// on a goroutine of its own once the program is idle (a channel it
// closes when its start is done), or at once when the result is needed
// first. The file source's map of a first version, the agent's edit
// cache and the reflector's maps of a first list are made so.
package later

// Result is the result of work started by Start.
type Result[T any] struct {
	done chan T
	now  chan struct{} // closed by Wait: work need not wait for idle
	v    T
	got  bool
}

// Start runs work on a goroutine of its own once idle is closed, or at
// once if idle is nil, or when Wait is called, whichever comes first.
func Start[T any](idle <-chan struct{}, work func() T) *Result[T] {
	r := &Result[T]{done: make(chan T, 1), now: make(chan struct{})}
	if idle == nil {
		close(r.now)
	}
	go func() {
		select {
		case <-idle:
		case <-r.now:
		}
		r.done <- work()
	}()
	return r
}

// Done reports whether work has finished, without waiting for it or
// starting it (for tests).
func (r *Result[T]) Done() bool { return r.got || len(r.done) == 1 }

// Wait returns work's result, starting it now if it is still waiting for
// idle. Not safe for concurrent use; later calls return the same result.
func (r *Result[T]) Wait() T {
	if !r.got {
		select {
		case <-r.now:
		default:
			close(r.now)
		}
		r.v, r.got = <-r.done, true
	}
	return r.v
}
