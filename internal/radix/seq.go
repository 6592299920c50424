package radix

import (
	"bytes"
	"iter"
)

// The range functions below walk the tree recursively, which is faster than
// an Iterator and allocates only the closure.

// All returns the keys and values of the subtree of n in ascending key
// order.
func (n *Node[T]) All() iter.Seq2[[]byte, T] {
	return func(yield func([]byte, T) bool) { n.walk(yield) }
}

// Prefix returns the keys starting with prefix, and their values, in
// ascending key order.
func (n *Node[T]) Prefix(prefix []byte) iter.Seq2[[]byte, T] {
	seq, _ := n.prefix(prefix, false)
	return seq
}

// PrefixWatch is Prefix plus the channel that SeekPrefixWatch would return.
func (n *Node[T]) PrefixWatch(prefix []byte) (iter.Seq2[[]byte, T], <-chan struct{}) {
	return n.prefix(prefix, true)
}

// LowerBound returns the keys >= key, and their values, in ascending key
// order.
func (n *Node[T]) LowerBound(key []byte) iter.Seq2[[]byte, T] {
	return func(yield func([]byte, T) bool) { n.lowerBoundWalk(key, 0, yield) }
}

func emptySeq[T any](func([]byte, T) bool) {}

// prefix finds the node holding the keys starting with prefix, like
// SeekPrefixWatch, and returns a walk of it.
func (n *Node[T]) prefix(prefix []byte, watch bool) (iter.Seq2[[]byte, T], <-chan struct{}) {
	d := 0
	var found *Node[T]
	for {
		p := n.path()
		if len(p) >= len(prefix) {
			if string(p[d:len(prefix)]) == string(prefix[d:]) {
				found = n
			}
			break
		}
		if string(p[d:]) != string(prefix[d:len(p)]) {
			break
		}
		d = len(p)
		c := n.child(prefix[d])
		if c == nil {
			break
		}
		n = c
	}
	var ch <-chan struct{}
	if watch {
		ch = n.watchChan()
	}
	if found == nil {
		return emptySeq[T], ch
	}
	return found.All(), ch
}

// walk yields every key of the subtree in order; false means yield asked
// to stop. Childless children are yielded here rather than recursed into,
// which saves a call per key.
func (n *Node[T]) walk(yield func([]byte, T) bool) bool {
	if n.leaf && !yield(n.path(), n.val) {
		return false
	}
	switch n.kind {
	case kindLeaf:
	case kind256:
		for _, c := range &n.as256().children {
			if c != nil && !c.walkChild(yield) {
				return false
			}
		}
	default:
		_, children := n.dense()
		for _, c := range children[:n.size] {
			if !c.walkChild(yield) {
				return false
			}
		}
	}
	return true
}

// walkChild is walk for a child, with childless nodes handled inline.
func (n *Node[T]) walkChild(yield func([]byte, T) bool) bool {
	if n.kind == kindLeaf {
		return yield(n.path(), n.val)
	}
	return n.walk(yield)
}

// lowerBoundWalk yields the keys >= key of the subtree of n, whose path is
// known to match key[:d].
func (n *Node[T]) lowerBoundWalk(key []byte, d int, yield func([]byte, T) bool) bool {
	p := n.path()
	m := min(len(p), len(key))
	cmp := bytes.Compare(p[d:m], key[d:m])
	switch {
	case cmp > 0 || (cmp == 0 && len(p) >= len(key)):
		return n.walk(yield)
	case cmp < 0:
		return true
	}
	// n's own value is a proper prefix of key, so smaller: skip it.
	d = len(p)
	slot, exact := n.lowerBound(key[d])
	c, _, next := n.nextChild(slot)
	if exact {
		if !c.lowerBoundWalk(key, d, yield) {
			return false
		}
		c, _, next = n.nextChild(next)
	}
	for ; c != nil; c, _, next = n.nextChild(next) {
		if !c.walk(yield) {
			return false
		}
	}
	return true
}
