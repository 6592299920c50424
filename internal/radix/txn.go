package radix

import "slices"

// Txn builds a new version of a Tree. It is not safe for concurrent use;
// the trees it started from and the ones it committed stay readable by
// anyone meanwhile.
type Txn[T any] struct {
	// root is nil while a Delete emptied the tree and nothing was written
	// or read since: the empty root node is made only if someone needs it
	// (see emptyRoot), so that a delete followed by an insert, the
	// revision index's lot on every replace in a small table, allocates
	// one node rather than two.
	root  *Node[T]
	size  int
	id    uint64 // current generation: nodes carrying it are mutated in place
	track bool
	// copyKey is set during InsertCopy: a key the tree keeps is copied.
	copyKey bool

	// retired holds the nodes this Txn took out of the tree whose watch
	// channels Notify must close. A node of an earlier generation is copied
	// at most once per generation, so there are no duplicates to weed out.
	retired    []*Node[T]
	retiredBuf [6]*Node[T]
}

// TrackMutate sets whether the Txn records replaced nodes so that Notify
// (and Commit) closes their watch channels. Off by default, as in iradix;
// turn it on for every tree somebody may watch.
func (t *Txn[T]) TrackMutate(track bool) { t.track = track }

// Root returns the root of the Txn's current, uncommitted tree. Reads
// through it see the Txn's writes; it must not be used once the Txn writes
// again.
func (t *Txn[T]) Root() *Node[T] { return t.emptyRoot() }

// emptyRoot returns t.root, first making an empty root node if a Delete
// left none.
func (t *Txn[T]) emptyRoot() *Node[T] {
	if t.root == nil {
		t.root = newNode[T](kind4, t.id)
	}
	return t.root
}

// Len returns the number of keys in the Txn's current tree.
func (t *Txn[T]) Len() int { return t.size }

// Get returns the value stored under k, including the Txn's own writes.
func (t *Txn[T]) Get(k []byte) (T, bool) {
	if t.root == nil {
		var zero T
		return zero, false
	}
	return t.root.Get(k)
}

// Insert stores v under k and returns the previous value, if any. The Txn
// keeps k if k was not in the tree (a key already there keeps the bytes it
// was stored with), so the caller must not modify it afterwards.
func (t *Txn[T]) Insert(k []byte, v T) (T, bool) {
	if t.root == nil {
		t.root = t.newRoot(t.keep(k), v)
		t.size++
		var zero T
		return zero, false
	}
	root, old, had := t.insert(t.root, 0, k, v)
	t.root = root
	if !had {
		t.size++
	}
	return old, had
}

// InsertCopy is Insert for a key the caller reuses (a scratch buffer): if
// k is not in the tree, the tree keeps a copy of it; if it is, nothing of k
// is kept and nothing is allocated for it.
func (t *Txn[T]) InsertCopy(k []byte, v T) (T, bool) {
	t.copyKey = true
	old, had := t.Insert(k, v)
	t.copyKey = false
	return old, had
}

// keep returns key for the tree to keep: key itself, or during InsertCopy
// a copy of it. Each insert keeps its key at most once (as a new leaf's
// path or a split node's).
func (t *Txn[T]) keep(key []byte) []byte {
	if t.copyKey {
		return append([]byte(nil), key...)
	}
	return key
}

// Delete removes k and returns its value, if it was present. The Txn does
// not keep k.
func (t *Txn[T]) Delete(k []byte) (T, bool) {
	if t.root == nil {
		var zero T
		return zero, false
	}
	root, old, had := t.delete(t.root, 0, k)
	if !had {
		return old, false
	}
	if root != nil && root.kind == kindLeaf {
		// A root has a watch channel, so it is never a bare leaf.
		root = t.newRoot(root.path(), root.val)
	}
	t.root = root // nil if now empty: see emptyRoot
	t.size--
	return old, true
}

// CommitOnly returns the Txn's current tree as a new Tree without closing
// any watch channel (call Notify for that). The Txn may be used further;
// its later writes copy nodes again and never change the returned Tree.
func (t *Txn[T]) CommitOnly() *Tree[T] {
	nt := t.Freeze()
	return &nt
}

// Freeze returns the Txn's current tree as a Tree value, like CommitOnly
// without the allocation: the nodes written so far become immutable, so
// later writes of the Txn copy them (and, tracked, close their watch
// channels at Notify). The returned value holds no reference to the Txn.
func (t *Txn[T]) Freeze() Tree[T] {
	// Only the root's generation needs checking: a node of the current
	// generation has only current-generation ancestors, so if the root is
	// older, nothing in the tree can be mutated in place any more.
	root := t.emptyRoot()
	if root.owner() == t.id {
		t.id = txnIDs.Add(1)
	}
	return Tree[T]{root: root, size: t.size}
}

// Notify closes the watch channels of every node the committed writes
// replaced or removed, if TrackMutate is on. Call it after CommitOnly, once
// the new tree is visible to readers; calling it again is a no-op.
func (t *Txn[T]) Notify() {
	if !t.track {
		return
	}
	for _, n := range t.retired {
		n.closeWatch()
	}
	t.dropRetired()
}

// Discard drops what the Txn refers to (its tree and the nodes it would
// notify), without notifying: for a Txn that is thrown away or kept for
// reuse (see Tree.InitTxn).
func (t *Txn[T]) Discard() {
	t.root, t.size = nil, 0
	t.dropRetired()
}

// dropRetired empties the list of retired nodes, leaving no reference to
// them behind, also in the inline buffer after the list outgrew it.
func (t *Txn[T]) dropRetired() {
	clear(t.retired)
	if cap(t.retired) != len(t.retiredBuf) {
		clear(t.retiredBuf[:])
	}
	t.retired = t.retiredBuf[:0]
}

// Commit is CommitOnly followed by Notify.
func (t *Txn[T]) Commit() *Tree[T] {
	nt := t.CommitOnly()
	t.Notify()
	return nt
}

// retire records that n leaves the tree. Nodes of earlier generations may
// have (or later get) watchers on old snapshots; nodes of the current one
// only if somebody watched through Root before committing. A leaf has no
// generation, so a replaced watched leaf is always retired; a bare leaf has
// no channel to close (its watchers hold its parent's, which the change
// writes).
func (t *Txn[T]) retire(n *Node[T]) {
	if t.track && n.kind != kindLeaf && (n.owner() != t.id || n.hasWatch()) {
		if len(t.retired) == cap(t.retired) {
			// Doubled, not grown by append's quarter: a start's status
			// writes retire hundreds of thousands of nodes, and the
			// list's copies were 12 MB of its allocations.
			t.retired = slices.Grow(t.retired, len(t.retired))
		}
		t.retired = append(t.retired, n)
	}
}

// writable returns n if the current generation owns it, else a copy of it
// that replaces n (always, for a leaf).
func (t *Txn[T]) writable(n *Node[T]) *Node[T] {
	if n.owner() == t.id {
		return n
	}
	t.retire(n)
	return n.clone(t.id)
}

// newRoot returns a root holding v under key and nothing else: a watched
// leaf, as a root has a watch channel whether the Txn tracks or not.
func (t *Txn[T]) newRoot(key []byte, v T) *Node[T] {
	r := newNode[T](kindWatchedLeaf, 0)
	r.setPath(key)
	r.val, r.leaf = v, true
	return r
}

// newLeaf returns a childless node holding v under key, which the tree
// keeps (see keep).
func (t *Txn[T]) newLeaf(key []byte, v T) *Node[T] {
	n := newNode[T](t.leafKind(), 0)
	n.leaf, n.val = true, v
	n.setPath(t.keep(key))
	return n
}

// leafKind is the kind of the leaves the Txn makes: with a watch channel if
// it tracks changes (somebody may watch the tree), bare if not.
func (t *Txn[T]) leafKind() kind {
	if t.track {
		return kindWatchedLeaf
	}
	return kindLeaf
}

// insert stores v under key in the subtree of n, whose path is known to
// match key[:d]. It returns the subtree's new top node.
func (t *Txn[T]) insert(n *Node[T], d int, key []byte, v T) (*Node[T], T, bool) {
	var zero T
	if n.size == 0 && !n.leaf {
		// Only an empty root gets here: the key becomes the whole tree, so
		// that the root's path is the common prefix of all keys.
		t.retire(n)
		return t.newRoot(t.keep(key), v), zero, false
	}
	p := n.path()
	c := d
	for c < len(p) && c < len(key) && p[c] == key[c] {
		c++
	}
	if c < len(p) {
		return t.split(n, c, key, v), zero, false
	}
	if c == len(key) {
		// n's path is the key: its bytes stay as they are (a copy of a
		// leaf keeps them too), so the tree keeps nothing of key.
		w := t.writable(n)
		old, had := w.val, w.leaf
		w.val, w.leaf = v, true
		return w, old, had
	}
	b := key[c]
	child := n.child(b)
	if child == nil {
		return t.addChild(n, b, t.newLeaf(key, v)), zero, false
	}
	nc, old, had := t.insert(child, c, key, v)
	if nc == child {
		// Changed in place, so n belongs to this generation as well.
		return n, old, had
	}
	w := t.writable(n)
	w.setChild(b, nc)
	return w, old, had
}

// split puts a new node4 with path key[:c] above n, whose path diverges from
// key at c, and stores v under key there or in a new leaf below it. A node
// with a channel is copied even though its own content does not change:
// prefix watchers whose prefix ends inside n's segment hold n's channel and
// must see the new key. (A bare leaf's watchers hold its parent's, which
// the split writes.)
func (t *Txn[T]) split(n *Node[T], c int, key []byte, v T) *Node[T] {
	var moved *Node[T]
	switch {
	case n.kind == kindLeaf:
		moved = n
	case n.kind == kindWatchedLeaf && !t.track:
		// A tree's only key, held by a watched root; below the root, an
		// untracked Txn's leaves are bare.
		moved = newNode[T](kindLeaf, 0)
		moved.copyHeader(n)
		moved.kind = kindLeaf
	default:
		moved = t.writable(n)
	}
	s := newNode[T](kind4, t.id)
	np := n.path()
	s.setPath(np[:c])
	s.insertChild(np[c], moved)
	if c == len(key) {
		s.setPath(t.keep(key))
		s.val, s.leaf = v, true
	} else {
		s.insertChild(key[c], t.newLeaf(key, v))
	}
	return s
}

// addChild returns n, or its replacement, with child c under the new label
// b, growing n to the next kind if it is full.
func (t *Txn[T]) addChild(n *Node[T], b byte, c *Node[T]) *Node[T] {
	var w *Node[T]
	if int(n.size) < n.kind.capacity() {
		w = t.writable(n)
	} else {
		t.retire(n)
		w = n.convert(n.kind.grown(), t.id)
	}
	w.insertChild(b, c)
	return w
}

// delete removes key from the subtree of n, whose path is known to match
// key[:d]. It returns the subtree's new top node, nil if it is now empty.
func (t *Txn[T]) delete(n *Node[T], d int, key []byte) (*Node[T], T, bool) {
	var zero T
	p := n.path()
	if len(p) > len(key) || string(p[d:]) != string(key[d:len(p)]) {
		return n, zero, false
	}
	if len(p) == len(key) {
		if !n.leaf {
			return n, zero, false
		}
		old := n.val // read before removeLeaf may clear it in place
		return t.removeLeaf(n), old, true
	}
	b := key[len(p)]
	child := n.child(b)
	if child == nil {
		return n, zero, false
	}
	nc, old, had := t.delete(child, len(p), key)
	switch {
	case !had || nc == child:
		return n, old, had
	case nc == nil:
		return t.removeChild(n, b), old, true
	default:
		w := t.writable(n)
		w.setChild(b, nc)
		return w, old, true
	}
}

// removeLeaf returns what replaces n once its value is gone.
func (t *Txn[T]) removeLeaf(n *Node[T]) *Node[T] {
	switch n.size {
	case 0:
		t.retire(n)
		return nil
	case 1:
		// The only child moves up as is; its path is absolute.
		t.retire(n)
		return n.minChild()
	}
	var zero T
	w := t.writable(n)
	w.leaf, w.val = false, zero
	return w
}

// removeChild returns what replaces n once its child under b is gone,
// shrinking n to a smaller kind when it got sparse.
func (t *Txn[T]) removeChild(n *Node[T], b byte) *Node[T] {
	left := int(n.size) - 1
	switch {
	case left == 0 && !n.leaf:
		t.retire(n)
		return nil
	case left == 0:
		t.retire(n)
		return t.newLeaf(n.path(), n.val)
	case left == 1 && !n.leaf:
		t.retire(n)
		c, label, pos := n.nextChild(0)
		if label == b {
			c, _, _ = n.nextChild(pos)
		}
		return c
	}
	var w *Node[T]
	if left < n.kind.shrinkBelow() {
		t.retire(n)
		w = n.convert(n.kind-1, t.id)
	} else {
		w = t.writable(n)
	}
	w.removeChild(b)
	return w
}
