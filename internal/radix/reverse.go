package radix

import "bytes"

// The descending walks: the mirror images of All and LowerBound in seq.go.
// A node's own key (its path) is a prefix of every key below it, so it is
// the smallest key of its subtree and comes last when walking down.

// Backward calls yield with every key of the subtree of n and its value,
// in descending key order, until yield returns false.
func (n *Node[T]) Backward(yield func([]byte, T) bool) {
	if n != nil {
		n.walkBackward(yield)
	}
}

// ReverseLowerBound calls yield with every key <= key of the subtree of n
// and its value, in descending key order, until yield returns false.
func (n *Node[T]) ReverseLowerBound(key []byte, yield func([]byte, T) bool) {
	if n != nil {
		n.reverseLowerBoundWalk(key, 0, yield)
	}
}

// walkBackward yields every key of the subtree in descending order; false
// means yield asked to stop.
func (n *Node[T]) walkBackward(yield func([]byte, T) bool) bool {
	for c, _, slot := n.prevChild(n.endSlot()); c != nil; c, _, slot = n.prevChild(slot) {
		if c.kind.isLeaf() {
			if !yield(c.path(), c.val) {
				return false
			}
		} else if !c.walkBackward(yield) {
			return false
		}
	}
	return !n.leaf || yield(n.path(), n.val)
}

// reverseLowerBoundWalk yields the keys <= key of the subtree of n, whose
// path is known to match key[:d], in descending order.
func (n *Node[T]) reverseLowerBoundWalk(key []byte, d int, yield func([]byte, T) bool) bool {
	p := n.path()
	m := min(len(p), len(key))
	switch cmp := bytes.Compare(p[d:m], key[d:m]); {
	case cmp < 0:
		// Every key below n starts with a path smaller than key.
		return n.walkBackward(yield)
	case cmp > 0 || len(p) > len(key):
		// Every key below n is greater (key is a proper prefix of them).
		return true
	case len(p) == len(key):
		// n's own key equals key; its children are greater.
		return !n.leaf || yield(p, n.val)
	}
	// n's path is a proper prefix of key: children under smaller labels
	// are wholly below key, the one under key's next byte partly, and n's
	// own key is below them all.
	d = len(p)
	slot, exact := n.upperSlot(key[d])
	c, _, slot := n.prevChild(slot)
	if exact {
		if !c.reverseLowerBoundWalk(key, d, yield) {
			return false
		}
		c, _, slot = n.prevChild(slot)
	}
	for ; c != nil; c, _, slot = n.prevChild(slot) {
		if !c.walkBackward(yield) {
			return false
		}
	}
	return !n.leaf || yield(p, n.val)
}

// endSlot is the slot after n's last child, the start of a descending
// walk with prevChild.
func (n *Node[T]) endSlot() int {
	if n.kind == kind256 {
		return 256
	}
	return int(n.size)
}

// prevChild returns the child at the highest slot below pos with its label
// and that slot, or a nil child. Slots are as for nextChild.
func (n *Node[T]) prevChild(pos int) (*Node[T], byte, int) {
	if n.kind == kind256 {
		chunks := &n.as256().chunks
		for pos--; pos >= 0; pos-- {
			c := chunks[pos>>4]
			if c == nil {
				pos &^= 15 // the loop's pos-- moves to the chunk below
				continue
			}
			if child := c.children[pos&15]; child != nil {
				return child, byte(pos), pos
			}
		}
		return nil, 0, 0
	}
	if pos = min(pos, int(n.size)) - 1; pos >= 0 {
		keys, children := n.dense()
		return children[pos], keys[pos], pos
	}
	return nil, 0, 0
}

// upperSlot returns the slot after the last child whose label is <= b, and
// whether that child's label is exactly b.
func (n *Node[T]) upperSlot(b byte) (int, bool) {
	if n.kind == kind256 {
		return int(b) + 1, n.as256().child256(b) != nil
	}
	keys, _ := n.dense()
	i := 0
	for i < int(n.size) && keys[i] <= b {
		i++
	}
	return i, i > 0 && keys[i-1] == b
}
