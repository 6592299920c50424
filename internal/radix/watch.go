package radix

import (
	"sync/atomic"
	"unsafe"
)

// A channel value is one pointer word. The helpers below store it in
// Node.watch as an unsafe.Pointer so that it can be filled and swapped with
// single atomic operations, without a second allocation to hold it.

func chanToPointer(ch chan struct{}) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&ch)) }
func pointerToChan(p unsafe.Pointer) chan struct{}  { return *(*chan struct{})(unsafe.Pointer(&p)) }

// closedWatch is installed in the watch slot of a replaced node that nobody
// watched yet, so that whoever asks later (from an old snapshot) sees the
// change at once.
var closedWatch = func() unsafe.Pointer {
	ch := make(chan struct{})
	close(ch)
	return chanToPointer(ch)
}()

// watchChan returns n's watch channel, creating it on first use. Safe for
// concurrent callers and against a concurrent closeWatch: whoever loses the
// race gets the winner's channel.
func (n *Node[T]) watchChan() <-chan struct{} {
	p := atomic.LoadPointer(&n.watch)
	if p == nil {
		ch := make(chan struct{})
		if atomic.CompareAndSwapPointer(&n.watch, nil, chanToPointer(ch)) {
			return ch
		}
		p = atomic.LoadPointer(&n.watch)
	}
	return pointerToChan(p)
}

// hasWatch tells whether anyone asked for n's watch channel.
func (n *Node[T]) hasWatch() bool { return atomic.LoadPointer(&n.watch) != nil }

// closeWatch closes n's watch channel for good: the current one if any, and
// every one handed out later.
func (n *Node[T]) closeWatch() {
	old := atomic.SwapPointer(&n.watch, closedWatch)
	if old != nil && old != closedWatch {
		close(pointerToChan(old))
	}
}

// closedChan returns a channel that is already closed.
func closedChan() <-chan struct{} { return pointerToChan(closedWatch) }

// Watch returns a channel that closes when n is replaced or removed by a
// tracked Txn (see TrackMutate). On a tree's root that is any change to the
// tree. On a nil *Node it is closed already.
func (n *Node[T]) Watch() <-chan struct{} {
	if n == nil {
		return closedChan()
	}
	return n.watchChan()
}
