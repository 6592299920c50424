package radix

// Matches is the walk behind statedb's longest-prefix-match index. That
// index keeps each entry under a key that starts with the entry's prefix
// (as one byte per bit) followed by a separator byte that never occurs in
// a prefix; the entries of a prefix k are then the keys that start with
// k+sep, and the prefixes containing a query q are the lengths d for which
// some key starts with q[:d]+sep.

// matchStack is how many nodes of a search path Matches keeps without
// allocating: deeper than the tree of any realistic table gets (a tree of
// a million random keys is about 25 nodes deep).
const matchStack = 48

// Matches calls yield with every length d, longest first, for which some
// key of the subtree of n starts with key[:d] followed by sep, together
// with the subtree that holds exactly those keys, until yield returns
// false. key must not contain sep.
//
// It walks down once without comparing path bytes, choosing children by
// key's bytes, then compares the deepest node's path with key once: every
// node on the way whose path is no longer than the common prefix is a
// prefix of key. Two places hold a group: the child under sep of such a
// node, and the first node whose path diverges from key, when it diverges
// with sep (the group's keys then share one compressed segment).
func (n *Node[T]) Matches(key []byte, sep byte, yield func(d int, sub *Node[T]) bool) {
	if n == nil {
		return
	}
	var buf [matchStack]*Node[T]
	stack := buf[:0]
	for {
		stack = append(stack, n)
		d := len(n.path())
		if d >= len(key) {
			break
		}
		if n = n.child(key[d]); n == nil {
			break
		}
	}
	last := stack[len(stack)-1].path()
	common := 0
	for common < len(last) && common < len(key) && last[common] == key[common] {
		common++
	}
	for i := len(stack) - 1; i >= 0; i-- {
		n := stack[i]
		p := n.path()
		if len(p) > common {
			// The first node past the common prefix holds the group of
			// key[:common] if its path continues with sep there.
			if (i == 0 || len(stack[i-1].path()) <= common) && p[common] == sep {
				if !yield(common, n) {
					return
				}
			}
			continue
		}
		if c := n.child(sep); c != nil && !yield(len(p), c) {
			return
		}
	}
}
