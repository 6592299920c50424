package radix

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// kind is the fan-out class of a node; it decides which struct embeds the
// Node header.
type kind uint8

const (
	kindLeaf        kind = iota // no children, no watch channel: a bare Node
	kindWatchedLeaf             // no children, a watch channel: watchedLeaf
	kind4                       // node4
	kind16                      // node16
	kind48                      // node48
	kind256                     // node256
)

// isLeaf reports whether a node of kind k has no children.
func (k kind) isLeaf() bool { return k <= kindWatchedLeaf }

// capacity is the number of children a node of kind k can hold.
func (k kind) capacity() int {
	return [...]int{kindLeaf: 0, kindWatchedLeaf: 0, kind4: 4, kind16: 16, kind48: 48, kind256: 256}[k]
}

// grown is the kind that holds one more child than k's capacity.
func (k kind) grown() kind {
	if k.isLeaf() {
		return kind4
	}
	return k + 1
}

// shrinkBelow is the child count below which a node of kind k is rebuilt as
// the next smaller kind. It leaves room for hysteresis so that a node at the
// border does not flip kinds on every insert/delete pair.
func (k kind) shrinkBelow() int {
	return [...]int{kindLeaf: 0, kindWatchedLeaf: 0, kind4: 0, kind16: 4, kind48: 13, kind256: 37}[k]
}

// Node is an immutable node of a Tree. The zero value is not usable; nodes
// come from Tree.Root and Txn.Root.
//
// A childless node has no generation (it is never changed in place, see
// owner). One made by a Txn that tracks changes (TrackMutate) has a watch
// channel: a watchedLeaf, 48 bytes with statedb's 16-byte value. One made
// by a Txn that does not (a tree nobody watches, such as statedb's revision
// index) is the bare Node (kindLeaf): a 16-byte header and the value, 32
// bytes; a watcher of such a leaf gets its parent's channel (watch.go).
// Every object in a statedb table is a leaf of two trees (its primary index
// and the revision index), so the revision index's bare leaves save every
// object 16 bytes.
type Node[T any] struct {
	// pathPtr and pathLen hold path(), the key from the root to the end of
	// this node's segment, in 12 bytes instead of a slice's 24.
	pathPtr *byte
	pathLen uint32
	size    uint16 // number of children
	kind    kind
	leaf    bool // val holds the value for key == path
	val     T
}

// watchedLeaf is a childless node with a watch channel. Its layout starts
// as inner's does, so that watchSlot serves both.
type watchedLeaf[T any] struct {
	Node[T]
	watch unsafe.Pointer
}

// inner is the header of a node with children (and of a tree's root, which
// is never a leaf): the Node, its watch channel and the Txn generation that
// created the node and may change it in place.
type inner[T any] struct {
	Node[T]
	// watch is the node's watch channel (a *hchan), nil until first asked
	// for. Only accessed atomically; see watch.go.
	watch unsafe.Pointer
	txnID uint64
}

type node4[T any] struct {
	inner[T]
	keys     [4]byte
	children [4]*Node[T]
}

type node16[T any] struct {
	inner[T]
	keys     [16]byte
	children [16]*Node[T]
}

// node48 keeps its children sorted like node4/16 and adds index, which maps
// a label to 1+position (0: absent) for a lookup without search.
type node48[T any] struct {
	inner[T]
	index    [256]uint8
	keys     [48]byte
	children [48]*Node[T]
}

// node256 holds its children in 16 chunks of 16, by the label's high and
// low nibble. A chunk is an allocation of its own, shared by the versions
// of the node until one of them changes a child in it: path copying a
// node256 then copies its 16 chunk pointers and the one chunk it changes
// (about 340 bytes) rather than 256 child pointers (2 KB), which is what a
// write into a table of a few hundred objects or more mostly copied. A nil
// chunk has no children.
type node256[T any] struct {
	inner[T]
	chunks [16]*chunk[T]
	// owned has bit i set when chunks[i] was made by this node, in its
	// generation: only such a chunk may be changed in place. A copy of the
	// node shares the chunks and owns none of them, so a chunk is copied
	// before it is changed by any node but the one that made it. (A
	// generation in the chunk, as nodes have, would make it 136 bytes,
	// which the allocator rounds to 144; without it a chunk is 128.)
	owned uint16
}

// chunk is 16 children of a node256.
type chunk[T any] struct {
	children [16]*Node[T]
}

// child256 returns the child of a node256 under label b, or nil.
func (n *node256[T]) child256(b byte) *Node[T] {
	if c := n.chunks[b>>4]; c != nil {
		return c.children[b&15]
	}
	return nil
}

// setChild256 sets the child of a writable node256 under label b (nil
// removes it), copying the chunk first if an earlier generation made it.
func (n *node256[T]) setChild256(b byte, child *Node[T]) {
	hi := b >> 4
	c := n.chunks[hi]
	switch {
	case c == nil && child == nil:
		return
	case c == nil:
		c = &chunk[T]{}
		n.chunks[hi] = c
		n.owned |= 1 << hi
	case n.owned&(1<<hi) == 0:
		c = &chunk[T]{children: c.children}
		n.chunks[hi] = c
		n.owned |= 1 << hi
	}
	c.children[b&15] = child
	if child == nil && c.children == [16]*Node[T]{} {
		n.chunks[hi] = nil
	}
}

// The casts below are valid because each node struct embeds Node as its
// first field (through inner for nodes with children) and kind records
// which struct was allocated.
func (n *Node[T]) as4() *node4[T]     { return (*node4[T])(unsafe.Pointer(n)) }
func (n *Node[T]) as16() *node16[T]   { return (*node16[T])(unsafe.Pointer(n)) }
func (n *Node[T]) as48() *node48[T]   { return (*node48[T])(unsafe.Pointer(n)) }
func (n *Node[T]) as256() *node256[T] { return (*node256[T])(unsafe.Pointer(n)) }

// owner returns the Txn generation that may change n in place: the one that
// created it, for a node with children. A leaf belongs to no generation
// (0, never a Txn's): it is never changed in place, a new value or a new
// child replaces it.
func (n *Node[T]) owner() uint64 {
	if n.kind.isLeaf() {
		return 0
	}
	return (*inner[T])(unsafe.Pointer(n)).txnID
}

// setOwner records id as the generation of n, which has children.
func (n *Node[T]) setOwner(id uint64) { (*inner[T])(unsafe.Pointer(n)).txnID = id }

// newNode allocates an empty node of kind k owned by generation id.
func newNode[T any](k kind, id uint64) *Node[T] {
	var n *Node[T]
	switch k {
	case kindLeaf:
		n = &Node[T]{}
	case kindWatchedLeaf:
		n = &(&watchedLeaf[T]{}).Node
	case kind4:
		n = &(&node4[T]{}).Node
	case kind16:
		n = &(&node16[T]{}).Node
	case kind48:
		n = &(&node48[T]{}).Node
	default:
		n = &(&node256[T]{}).Node
	}
	n.kind = k
	if !k.isLeaf() {
		n.setOwner(id)
	}
	return n
}

// dense returns the full key and child arrays of a node4/16/48; the first
// n.size entries are in use, sorted by key. Nil for other kinds.
func (n *Node[T]) dense() ([]byte, []*Node[T]) {
	switch n.kind {
	case kind4:
		n4 := n.as4()
		return n4.keys[:], n4.children[:]
	case kind16:
		n16 := n.as16()
		return n16.keys[:], n16.children[:]
	case kind48:
		n48 := n.as48()
		return n48.keys[:], n48.children[:]
	}
	return nil, nil
}

// child returns the child under label b, or nil.
func (n *Node[T]) child(b byte) *Node[T] {
	switch n.kind {
	case kind4:
		n4 := n.as4()
		for i := range int(n.size) {
			if n4.keys[i] == b {
				return n4.children[i]
			}
		}
	case kind16:
		n16 := n.as16()
		if i := index16(&n16.keys, int(n.size), b); i >= 0 {
			return n16.children[i]
		}
	case kind48:
		n48 := n.as48()
		if i := n48.index[b]; i != 0 {
			return n48.children[i-1]
		}
	case kind256:
		return n.as256().child256(b)
	}
	return nil
}

// index16 returns the position of b among the first size keys, or -1. It
// tests eight keys per step: a byte of x is zero where the key equals b, and
// (x-lo)&^x&hi marks the lowest such byte exactly (bits above it may be
// false positives, which the lowest-bit search ignores).
func index16(keys *[16]byte, size int, b byte) int {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	rep := lo * uint64(b)
	for w := 0; w < size; w += 8 {
		x := binary.LittleEndian.Uint64(keys[w:w+8]) ^ rep
		if m := (x - lo) &^ x & hi; m != 0 {
			if i := w + bits.TrailingZeros64(m)/8; i < size {
				return i
			}
			return -1
		}
	}
	return -1
}

// nextChild returns the first child at slot >= pos with its label and the
// slot after it, or a nil child. Slots are positions for dense kinds and
// labels for node256.
func (n *Node[T]) nextChild(pos int) (*Node[T], byte, int) {
	if n.kind == kind256 {
		chunks := &n.as256().chunks
		for pos < 256 {
			c := chunks[pos>>4]
			if c == nil {
				pos = (pos | 15) + 1
				continue
			}
			for end := (pos | 15) + 1; pos < end; pos++ {
				if child := c.children[pos&15]; child != nil {
					return child, byte(pos), pos + 1
				}
			}
		}
		return nil, 0, 256
	}
	if pos < int(n.size) {
		keys, children := n.dense()
		return children[pos], keys[pos], pos + 1
	}
	return nil, 0, pos
}

// lowerBound returns the first slot whose label is >= b and whether that
// label is exactly b.
func (n *Node[T]) lowerBound(b byte) (int, bool) {
	if n.kind == kind256 {
		return int(b), n.as256().child256(b) != nil
	}
	keys, _ := n.dense()
	for i := range int(n.size) {
		if keys[i] >= b {
			return i, keys[i] == b
		}
	}
	return int(n.size), false
}

// minChild returns the child with the smallest label, or nil.
func (n *Node[T]) minChild() *Node[T] {
	c, _, _ := n.nextChild(0)
	return c
}

// maxChild returns the child with the largest label, or nil.
func (n *Node[T]) maxChild() *Node[T] {
	if n.size == 0 {
		return nil
	}
	if n.kind == kind256 {
		c, _, _ := n.prevChild(256)
		return c
	}
	_, children := n.dense()
	return children[n.size-1]
}

// setChild replaces the existing child under label b. Writable nodes only.
func (n *Node[T]) setChild(b byte, c *Node[T]) {
	if n.kind == kind256 {
		n.as256().setChild256(b, c)
		return
	}
	keys, children := n.dense()
	for i := range int(n.size) {
		if keys[i] == b {
			children[i] = c
			return
		}
	}
	panic("radix: setChild on a missing label")
}

// insertChild adds child c under the absent label b. The node must be
// writable and have room.
func (n *Node[T]) insertChild(b byte, c *Node[T]) {
	if n.kind == kind256 {
		n.as256().setChild256(b, c)
		n.size++
		return
	}
	keys, children := n.dense()
	size := int(n.size)
	i := 0
	for i < size && keys[i] < b {
		i++
	}
	copy(keys[i+1:size+1], keys[i:size])
	copy(children[i+1:size+1], children[i:size])
	keys[i], children[i] = b, c
	n.size++
	if n.kind == kind48 {
		n.reindex(i)
	}
}

// removeChild drops the child under label b. Writable nodes only.
func (n *Node[T]) removeChild(b byte) {
	if n.kind == kind256 {
		n.as256().setChild256(b, nil)
		n.size--
		return
	}
	keys, children := n.dense()
	size := int(n.size)
	i := 0
	for i < size && keys[i] != b {
		i++
	}
	if i == size {
		panic("radix: removeChild on a missing label")
	}
	copy(keys[i:], keys[i+1:size])
	copy(children[i:], children[i+1:size])
	children[size-1] = nil // let the collector have it
	n.size--
	if n.kind == kind48 {
		n.as48().index[b] = 0
		n.reindex(i)
	}
}

// reindex refreshes node48's index for the positions from i on.
func (n *Node[T]) reindex(from int) {
	n48 := n.as48()
	for i := from; i < int(n.size); i++ {
		n48.index[n48.keys[i]] = uint8(i + 1)
	}
}

// clone returns a copy of n of the same kind owned by generation id (a leaf:
// by none), with no watch channel. It reads n's fields one by one rather
// than copying the struct because readers may be filling n.watch
// concurrently.
func (n *Node[T]) clone(id uint64) *Node[T] {
	var c *Node[T]
	switch n.kind {
	case kindLeaf:
		c = &Node[T]{}
	case kindWatchedLeaf:
		c = &(&watchedLeaf[T]{}).Node
	case kind4:
		src, dst := n.as4(), &node4[T]{}
		dst.keys, dst.children = src.keys, src.children
		c = &dst.Node
	case kind16:
		src, dst := n.as16(), &node16[T]{}
		dst.keys, dst.children = src.keys, src.children
		c = &dst.Node
	case kind48:
		src, dst := n.as48(), &node48[T]{}
		dst.index, dst.keys, dst.children = src.index, src.keys, src.children
		c = &dst.Node
	default:
		// The chunks are shared (owned by none); setChild256 copies one
		// before changing it.
		src, dst := n.as256(), &node256[T]{}
		dst.chunks = src.chunks
		c = &dst.Node
	}
	c.copyHeader(n)
	if !c.kind.isLeaf() {
		c.setOwner(id)
	}
	return c
}

// convert returns a copy of n rebuilt as kind k, which must have room for
// n's children, owned by generation id.
func (n *Node[T]) convert(k kind, id uint64) *Node[T] {
	c := newNode[T](k, id)
	c.copyHeader(n)
	c.kind, c.size = k, 0
	for child, label, pos := n.nextChild(0); child != nil; child, label, pos = n.nextChild(pos) {
		c.insertChild(label, child)
	}
	return c
}

// copyHeader copies the Node but the watch channel; not the generation nor
// the kind's arrays.
func (n *Node[T]) copyHeader(src *Node[T]) {
	n.pathPtr, n.pathLen = src.pathPtr, src.pathLen
	n.size = src.size
	n.kind = src.kind
	n.leaf = src.leaf
	n.val = src.val
}

// path returns the key from the root to the end of n's segment.
func (n *Node[T]) path() []byte { return unsafe.Slice(n.pathPtr, n.pathLen) }

// setPath sets n's path; n keeps p.
func (n *Node[T]) setPath(p []byte) {
	n.pathPtr, n.pathLen = unsafe.SliceData(p), uint32(len(p))
}
