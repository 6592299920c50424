package radix

import "bytes"

// Iterator walks the keys of a subtree in ascending byte order, one Next at
// a time: for a caller that pulls from several trees at once (statedb's
// change feed merges two). Get one from Node.Iterator, optionally position
// it with SeekLowerBound, then call Next. To walk one tree, the walks (All,
// Prefix(p).All, LowerBound) are faster.
type Iterator[T any] struct {
	node  *Node[T] // what SeekLowerBound searches from
	stack []frame[T]
	buf   [8]frame[T] // initial stack storage: no allocation for shallow trees
}

// frame is a node being walked: pos is the next child slot to visit, or -1
// if the node's own value was not yet visited.
type frame[T any] struct {
	n   *Node[T]
	pos int
}

// Iterator returns an iterator over the subtree of n.
func (n *Node[T]) Iterator() *Iterator[T] {
	it := &Iterator[T]{node: n}
	it.stack = append(it.buf[:0], frame[T]{n, -1})
	return it
}

// SeekLowerBound positions the iterator at the smallest key >= key; Next
// then returns it and every larger key.
func (i *Iterator[T]) SeekLowerBound(key []byte) {
	i.stack = i.buf[:0]
	n := i.node
	if n == nil {
		return
	}
	d := 0
	for {
		p := n.path()
		m := min(len(p), len(key))
		cmp := bytes.Compare(p[d:m], key[d:m])
		if cmp > 0 || (cmp == 0 && len(p) >= len(key)) {
			// Every key below n is >= key.
			i.stack = append(i.stack, frame[T]{n, -1})
			return
		}
		if cmp < 0 {
			// Every key below n is < key.
			return
		}
		// n's own value is a proper prefix of key, so smaller: skip it.
		d = len(p)
		slot, exact := n.lowerBound(key[d])
		if !exact {
			i.stack = append(i.stack, frame[T]{n, slot})
			return
		}
		c, _, next := n.nextChild(slot)
		i.stack = append(i.stack, frame[T]{n, next})
		n = c
	}
}

// Next returns the next key and value in ascending key order, or false when
// there are no more. The key must not be modified.
func (i *Iterator[T]) Next() ([]byte, T, bool) {
	for len(i.stack) > 0 {
		top := &i.stack[len(i.stack)-1]
		n := top.n
		if top.pos < 0 {
			top.pos = 0
			if n.leaf {
				return n.path(), n.val, true
			}
		}
		c, _, next := n.nextChild(top.pos)
		if c == nil {
			i.stack = i.stack[:len(i.stack)-1]
			continue
		}
		top.pos = next
		if c.kind.isLeaf() {
			// Childless: visit without pushing.
			return c.path(), c.val, true
		}
		i.stack = append(i.stack, frame[T]{c, -1})
	}
	var zero T
	return nil, zero, false
}
