package statedb

import (
	iradix "github.com/steadystate/steadystate/internal/radix"
)

// The persistent radix tree behind every index. All of statedb reaches the
// tree implementation through these aliases, so it can be exchanged here.
type (
	tree         = iradix.Tree[object]
	treeTxn      = iradix.Txn[object]
	treeNode     = iradix.Node[object]
	treeIterator = iradix.Iterator[object]
)

func newTree() tree { return iradix.Empty[object]() }

// closedWatch returns a channel that is closed already: the watch channel
// of what has happened. It is the radix tree's own (that of a nil node).
func closedWatch() <-chan struct{} { return (*treeNode)(nil).Watch() }

// object is what every index stores: the user's object and the revision at
// which it was written (for objects in the graveyard: deleted).
type object struct {
	data     any
	revision Revision
}
