package radix

import (
	"sync/atomic"
	"unsafe"
)

// A channel value is one pointer word. The helpers below store it in the
// watch slot of a node with children (inner.watch) as an unsafe.Pointer so
// that it can be filled and swapped with single atomic operations, without
// a second allocation to hold it. A leaf has no slot: whoever watches a
// leaf gets the channel of its parent, which every change of the leaf
// replaces (a new value, a delete, a key split off below it all write the
// parent's child pointer), at the price of also closing on changes of the
// leaf's siblings (a spurious wake-up, which watchers allow for).

// watchSlot returns the watch slot of n, which must not be a bare leaf. It
// reads n as a watchedLeaf, the shortest of the structs whose layout starts
// with a Node and a watch slot (a conversion to a longer one would claim
// memory beyond a watchedLeaf's allocation).
func (n *Node[T]) watchSlot() *unsafe.Pointer { return &(*watchedLeaf[T])(unsafe.Pointer(n)).watch }

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
//
// n must not be a leaf.
func (n *Node[T]) watchChan() <-chan struct{} {
	slot := n.watchSlot()
	p := atomic.LoadPointer(slot)
	if p == nil {
		ch := make(chan struct{})
		if atomic.CompareAndSwapPointer(slot, nil, chanToPointer(ch)) {
			return ch
		}
		p = atomic.LoadPointer(slot)
	}
	return pointerToChan(p)
}

// hasWatch tells whether anyone asked for n's watch channel (never, for a
// leaf).
func (n *Node[T]) hasWatch() bool {
	return n.kind != kindLeaf && atomic.LoadPointer(n.watchSlot()) != nil
}

// closeWatch closes n's watch channel for good: the current one if any, and
// every one handed out later. n must not be a leaf.
func (n *Node[T]) closeWatch() {
	old := atomic.SwapPointer(n.watchSlot(), closedWatch)
	if old != nil && old != closedWatch {
		close(pointerToChan(old))
	}
}

// closedChan returns a channel that is already closed.
func closedChan() <-chan struct{} { return pointerToChan(closedWatch) }

// Watch returns a channel that closes when n is replaced or removed by a
// tracked Txn (see TrackMutate). On a tree's root (Tree.Root, Txn.Root: a
// root is never a bare leaf) that is any change to the tree. On a nil
// *Node it is closed already, and so it is on a bare leaf, which has no
// channel: watch one through GetWatch or PrefixWatch, which give its
// parent's.
func (n *Node[T]) Watch() <-chan struct{} {
	if n == nil || n.kind == kindLeaf {
		return closedChan()
	}
	return n.watchChan()
}
