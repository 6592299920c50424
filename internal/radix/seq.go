package radix

import "bytes"

// The walks below are recursive, which is faster than an Iterator, and
// take the caller's yield function directly, so that a caller that wraps
// them in a range function of its own (as statedb does) allocates nothing
// more. All has the signature of an iter.Seq2: range over the method value,
// as in `for k, v := range root.Prefix(p).All`.
//
// A nil *Node is an empty tree that is never written: its walks yield
// nothing and its watch channels are closed already (there is nothing to
// wait for). statedb reads a table that did not exist yet in a snapshot
// this way.

// All calls yield with every key of the subtree of n and its value, in
// ascending key order, until yield returns false.
func (n *Node[T]) All(yield func([]byte, T) bool) {
	if n != nil {
		n.walk(yield)
	}
}

// Prefix returns the subtree of n that holds exactly the keys starting with
// prefix, or nil when there are none. Its All walks them; its Minimum is the
// first of them.
func (n *Node[T]) Prefix(prefix []byte) *Node[T] {
	found, _ := n.seekPrefix(prefix)
	return found
}

// PrefixWatch is Prefix plus a channel that closes once a committed,
// tracked Txn inserts, replaces or deletes a key starting with prefix
// (spuriously also on other changes within the same node): the channel of
// the deepest node on the search path.
func (n *Node[T]) PrefixWatch(prefix []byte) (*Node[T], <-chan struct{}) {
	found, watched := n.seekPrefix(prefix)
	return found, watched.Watch()
}

// LowerBound calls yield with every key >= key of the subtree of n and its
// value, in ascending key order, until yield returns false.
func (n *Node[T]) LowerBound(key []byte, yield func([]byte, T) bool) {
	if n != nil {
		n.lowerBoundWalk(key, 0, yield)
	}
}

// seekPrefix returns the node whose subtree holds exactly the keys starting
// with prefix (nil if none) and the deepest node with children on the
// search path, whose watch channel closes on any change under prefix (a
// leaf at the end of the path is written through its parent's child
// pointer). n must be a tree's root or nil.
func (n *Node[T]) seekPrefix(prefix []byte) (found, watched *Node[T]) {
	if n == nil {
		return nil, nil
	}
	watched = n
	d := 0
	for {
		if n.kind != kindLeaf {
			watched = n
		}
		p := n.path()
		if len(p) >= len(prefix) {
			// The prefix ends inside (or at the end of) n's segment.
			if string(p[d:len(prefix)]) == string(prefix[d:]) {
				return n, watched
			}
			return nil, watched
		}
		if string(p[d:]) != string(prefix[d:len(p)]) {
			return nil, watched
		}
		d = len(p)
		c := n.child(prefix[d])
		if c == nil {
			return nil, watched
		}
		n = c
	}
}

// walk yields every key of the subtree in order; false means yield asked
// to stop. Childless children are yielded here rather than recursed into,
// which saves a call per key (the check is written out in each loop: a
// helper for it would not be inlined into this recursive function).
func (n *Node[T]) walk(yield func([]byte, T) bool) bool {
	if n.leaf && !yield(n.path(), n.val) {
		return false
	}
	switch n.kind {
	case kindLeaf, kindWatchedLeaf:
	case kind256:
		for _, ch := range &n.as256().chunks {
			if ch == nil {
				continue
			}
			for _, c := range &ch.children {
				if c == nil {
					continue
				}
				if c.kind.isLeaf() {
					if !yield(c.path(), c.val) {
						return false
					}
				} else if !c.walk(yield) {
					return false
				}
			}
		}
	default:
		_, children := n.dense()
		for _, c := range children[:n.size] {
			if c.kind.isLeaf() {
				if !yield(c.path(), c.val) {
					return false
				}
			} else if !c.walk(yield) {
				return false
			}
		}
	}
	return true
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
