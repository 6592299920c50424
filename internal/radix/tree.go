package radix

import "sync/atomic"

// Tree is an immutable radix tree mapping byte-string keys to values of type
// T. Any number of goroutines may read it at once; changes go through Txn
// and produce a new Tree.
type Tree[T any] struct {
	root *Node[T]
	size int
}

// txnIDs hands out Txn generations. It is process-wide so that two Txns,
// even on unrelated trees, never consider each other's nodes writable.
var txnIDs atomic.Uint64

// New returns an empty Tree.
func New[T any]() *Tree[T] {
	t := Empty[T]()
	return &t
}

// Empty returns an empty Tree as a value, for callers that keep trees
// inside their own structures.
func Empty[T any]() Tree[T] {
	return Tree[T]{root: newNode[T](kind4, txnIDs.Add(1))}
}

// Len returns the number of keys in the tree.
func (t *Tree[T]) Len() int { return t.size }

// Root returns the root node, the entry point for watches and iteration.
func (t *Tree[T]) Root() *Node[T] { return t.root }

// Get returns the value stored under k and whether there is one.
func (t *Tree[T]) Get(k []byte) (T, bool) { return t.root.Get(k) }

// Txn starts a transaction that builds a new version of the tree. The tree
// itself is never changed by it.
func (t *Tree[T]) Txn() *Txn[T] {
	txn := &Txn[T]{root: t.root, size: t.size, id: txnIDs.Add(1)}
	txn.retired = txn.retiredBuf[:0]
	return txn
}

// InitTxn makes *txn a fresh transaction on t, like Txn does, without
// allocating it: for callers that embed the Txn in a larger object.
//
// *txn must be zero or a Txn that was discarded (Txn.Discard) or notified
// (Txn.Notify): it is reused without clearing it again.
func (t *Tree[T]) InitTxn(txn *Txn[T]) {
	txn.root, txn.size, txn.id, txn.track = t.root, t.size, txnIDs.Add(1), false
	txn.retired = txn.retiredBuf[:0]
}
