package radix

// Get returns the value stored under k in the subtree of n and whether
// there is one.
//
// It compares no path bytes on the way down: a node's children are chosen
// by the key byte at the end of the node's path, and the one full compare
// against the path of the node that would hold k settles the answer.
func (n *Node[T]) Get(k []byte) (T, bool) {
	for {
		d := len(n.path())
		if d >= len(k) {
			if d == len(k) && n.leaf && string(n.path()) == string(k) {
				return n.val, true
			}
			break
		}
		b := k[d]
		var c *Node[T]
		switch n.kind {
		case kind4:
			n4 := n.as4()
			for i := range int(n.size) {
				if n4.keys[i] == b {
					c = n4.children[i]
					break
				}
			}
		case kind16:
			n16 := n.as16()
			if i := index16(&n16.keys, int(n.size), b); i >= 0 {
				c = n16.children[i]
			}
		case kind48:
			n48 := n.as48()
			if i := n48.index[b]; i != 0 {
				c = n48.children[i-1]
			}
		case kind256:
			if ch := n.as256().chunks[b>>4]; ch != nil {
				c = ch.children[b&15]
			}
		}
		if c == nil {
			break
		}
		n = c
	}
	var zero T
	return zero, false
}

// GetWatch returns the value stored under k, whether there is one, and a
// channel that closes once a committed, tracked Txn changes the answer: the
// channel of the node holding the value if found, else of the deepest node
// on the search path, and for a leaf its parent's. See the package doc for
// spurious closes. n must be a tree's root (or nil: then it finds nothing
// and the channel is closed already).
func (n *Node[T]) GetWatch(k []byte) (<-chan struct{}, T, bool) {
	var zero T
	if n == nil {
		return closedChan(), zero, false
	}
	watched := n // the deepest node with children on the path
	d := 0
	for {
		if n.kind != kindLeaf {
			watched = n
		}
		p := n.path()
		if len(p) > len(k) || string(p[d:]) != string(k[d:len(p)]) {
			break
		}
		d = len(p)
		if d == len(k) {
			if n.leaf {
				return watched.watchChan(), n.val, true
			}
			break
		}
		c := n.child(k[d])
		if c == nil {
			break
		}
		n = c
	}
	return watched.watchChan(), zero, false
}

// Minimum returns the smallest key in the subtree of n with its value.
func (n *Node[T]) Minimum() ([]byte, T, bool) {
	for ; n != nil; n = n.minChild() {
		if n.leaf {
			return n.path(), n.val, true
		}
	}
	var zero T
	return nil, zero, false
}

// Maximum returns the largest key in the subtree of n with its value.
func (n *Node[T]) Maximum() ([]byte, T, bool) {
	var zero T
	if n == nil {
		return nil, zero, false
	}
	for {
		c := n.maxChild()
		if c == nil {
			break
		}
		n = c
	}
	if n.leaf {
		return n.path(), n.val, true
	}
	return nil, zero, false
}
