package statedb

import (
	"slices"

	"github.com/steadystate/steadystate/index"
)

// The revision index of a table inside a WriteTxn. Every write removes the
// object's old revision from it and adds the new one. Both are kept in
// lists and go into the tree in one run when anything reads the index
// (tableEntry.root, tableEntry.snapshot) or the transaction commits
// (txnState.freeze): so the primary index's new leaves, made one per write,
// lie next to each other in memory rather than between the revision
// index's (a walk of a table filled in large transactions touches half as
// many cache lines), and the revision tree grows at its right edge in a
// tight loop. The removals and additions go in alternately, as the writes
// made them (a replace removes one and adds one): all removals first would
// empty the revision tree's node of the revisions a transaction replaces
// (shrinking it from node256 to node4) before refilling it, all additions
// first would split a small tree's leaves only to join them again.
// revPending holds the additions, in revision order, all above
// revFlushed; a revision at or below it is in the tree, and revRemoved
// holds those of them to take out.

// revAdd records that obj (whose revision is the table's newest) enters
// the revision index.
func (tt *txnTable) revAdd(obj object) {
	tt.revPending = append(tt.revPending, obj)
	if len(tt.revPending) >= revBatch {
		tt.revFlush()
	}
}

// revBatch is the most additions (or removals) kept before they go into
// the tree: enough for locality (runs of this many primary leaves lie
// together), few enough that a huge transaction does not grow huge lists.
const revBatch = 1024

// revRemove takes revision rev out of the revision index: out of the list
// if it is there (a key written twice in the transaction), else out of the
// tree.
func (tt *txnTable) revRemove(rev Revision) {
	if rev > tt.revFlushed {
		i, found := slices.BinarySearchFunc(tt.revPending, rev, func(o object, r Revision) int {
			switch {
			case o.revision < r:
				return -1
			case o.revision > r:
				return 1
			}
			return 0
		})
		if found {
			tt.revPending = slices.Delete(tt.revPending, i, i+1)
		}
		return
	}
	tt.revRemoved = append(tt.revRemoved, rev)
	if len(tt.revRemoved) >= revBatch {
		tt.revFlush()
	}
}

// revFlush puts the recorded additions into the revision index's tree.
func (tt *txnTable) revFlush() {
	if len(tt.revPending) == 0 && len(tt.revRemoved) == 0 {
		return
	}
	txn := tt.txn(tt.entry.meta.revisionIndex())
	for i := range max(len(tt.revPending), len(tt.revRemoved)) {
		if i < len(tt.revRemoved) {
			txn.Delete(tt.revKey(tt.revRemoved[i]))
		}
		if i < len(tt.revPending) {
			o := tt.revPending[i]
			txn.Insert(index.Uint64(o.revision), o)
		}
	}
	clear(tt.revPending)
	tt.revPending = tt.revPending[:0]
	tt.revRemoved = tt.revRemoved[:0]
	tt.revFlushed = tt.entry.revision
}
