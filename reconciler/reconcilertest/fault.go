package reconcilertest

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/steadystate/steadystate/reconciler"
)

// ErrInjected is wrapped by every error a Fault makes up (one without
// Err): "injected failure of KEY", with " (terminal)" or " (panic)" added
// for those faults.
var ErrInjected = errors.New("injected failure")

// Fault is what a Target does instead of applying an operation, for each
// operation on the key it was injected for.
type Fault struct {
	// Times is how many operations the fault hits before it clears
	// itself; 0 means every operation until it is cleared.
	Times int
	// Err is the error the operations return; nil means one that wraps
	// ErrInjected and names the key.
	Err error
	// Terminal marks the error with reconciler.Terminal: the reconciler
	// then leaves the object in Error until it changes.
	Terminal bool
	// Panic makes the operations panic with the error instead of
	// returning it.
	Panic bool
	// Block makes the operations wait until the fault is cleared, then
	// proceed as if there were no fault, or until their context ends,
	// then fail with its error. It cannot be combined with Err, Terminal
	// or Panic.
	Block bool
	// IgnoreContext, with Block, makes the operations wait until the fault
	// is cleared even when their context ends: a target that ignores its
	// context, which the reconciler abandons after OperationTimeout. Clear
	// the fault before the test ends, or the operation's goroutine leaks.
	IgnoreContext bool
}

// fault is an injected Fault.
type fault struct {
	Fault
	key      string
	prune    bool
	left     int           // operations still to hit, when Times > 0
	released chan struct{} // closed when cleared: blocked operations go on
	once     sync.Once
}

func (f *fault) release() { f.once.Do(func() { close(f.released) }) }

// outcome is what a fault makes of one operation.
type outcome struct {
	err    error
	panics bool
	block  <-chan struct{} // wait for this before going on
	deaf   bool            // and ignore the context meanwhile
}

// errorFor returns the error an operation on key fails with.
func (f *fault) errorFor(key string) error {
	err := f.Err
	if err == nil {
		what := "prune"
		if !f.prune {
			what = key
		}
		switch {
		case f.Terminal:
			err = fmt.Errorf("%w of %s (terminal)", ErrInjected, what)
		case f.Panic:
			err = fmt.Errorf("%w of %s (panic)", ErrInjected, what)
		default:
			err = fmt.Errorf("%w of %s", ErrInjected, what)
		}
	}
	if f.Terminal {
		err = reconciler.Terminal(err)
	}
	return err
}

// Inject makes the operations on key (Update and Delete, also as batch
// entries) behave as f says, replacing key's earlier fault; operations
// that an earlier fault blocks stay blocked until it is cleared. The
// returned function clears this fault, if it is still in place, and
// releases the operations it blocks; it may be called more than once.
// Inject panics if f is contradictory (Block with Err, Terminal or Panic,
// or a negative Times).
func (t *Target[Obj]) Inject(key string, f Fault) (clear func()) {
	return t.inject(&fault{Fault: f, key: key})
}

// InjectPrune makes Prune behave as f says; see Inject.
func (t *Target[Obj]) InjectPrune(f Fault) (clear func()) {
	return t.inject(&fault{Fault: f, prune: true})
}

func (t *Target[Obj]) inject(f *fault) func() {
	if f.Times < 0 || (f.Block && (f.Err != nil || f.Terminal || f.Panic)) || (f.IgnoreContext && !f.Block) {
		panic(fmt.Sprintf("reconcilertest: contradictory fault %+v: Block goes with Times and IgnoreContext only, IgnoreContext needs Block, and Times must not be negative", f.Fault))
	}
	f.left = f.Times
	f.released = make(chan struct{})
	t.mu.Lock()
	defer t.mu.Unlock()
	if f.prune {
		t.pruneFault = f
	} else {
		t.faults[f.key] = f
	}
	if f.Block {
		t.blocking = append(t.blocking, f)
	}
	t.changed.wake()
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.clearLocked(func(g *fault) bool { return g == f })
	}
}

// Clear removes key's fault and releases every operation on key that a
// fault blocks.
func (t *Target[Obj]) Clear(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clearLocked(func(f *fault) bool { return !f.prune && f.key == key })
}

// ClearPrune removes Prune's fault and releases a Prune that it blocks.
func (t *Target[Obj]) ClearPrune() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clearLocked(func(f *fault) bool { return f.prune })
}

// clearLocked uninstalls and releases the faults that match; t.mu is held.
func (t *Target[Obj]) clearLocked(match func(*fault) bool) {
	for key, f := range t.faults {
		if match(f) {
			delete(t.faults, key)
		}
	}
	if t.pruneFault != nil && match(t.pruneFault) {
		t.pruneFault = nil
	}
	t.blocking = slices.DeleteFunc(t.blocking, func(f *fault) bool {
		if match(f) {
			f.release()
			return true
		}
		return false
	})
	t.changed.wake()
}

// hitLocked applies the installed fault of op (if any) to one operation;
// t.mu is held. A fault whose Times are used up is uninstalled, but
// operations it blocks stay blocked until it is cleared.
func (t *Target[Obj]) hitLocked(op Op[Obj]) outcome {
	f := t.pruneFault
	if op.Kind != reconciler.OpPrune {
		f = t.faults[op.Key]
	}
	if f == nil {
		return outcome{}
	}
	if f.Times > 0 {
		if f.left--; f.left == 0 {
			if f.prune {
				t.pruneFault = nil
			} else {
				delete(t.faults, f.key)
			}
		}
	}
	if f.Block {
		return outcome{block: f.released, deaf: f.IgnoreContext}
	}
	return outcome{err: f.errorFor(op.Key), panics: f.Panic}
}
