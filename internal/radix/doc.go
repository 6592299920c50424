// Package radix is a persistent (immutable, copy-on-write) adaptive radix
// tree with watch channels. It is a drop-in replacement for the subset of
// github.com/hashicorp/go-immutable-radix/v2 that statedb uses, built for
// fewer allocations per write and faster lookups, plus the walks that
// statedb's reverse queries and longest-prefix-match index need: Backward
// and ReverseLowerBound (reverse.go), descending mirrors of All and
// LowerBound, and Matches (matches.go), which finds in one walk down a key
// every prefix of it that starts a group of keys.
//
// # Invariants
//
//   - Immutability: a *Tree and every node reachable from it never change
//     after the Txn that produced it returned it from CommitOnly/Commit. The
//     one exception is a node's watch channel slot, which readers fill lazily
//     and Notify closes; both sides use atomic operations only.
//   - Who may write: one goroutine per Txn. Any number of goroutines may read
//     any committed Tree at the same time, including while a Txn derived from
//     it is being written.
//   - Ownership by generation: every node with children carries the id of
//     the txn generation that created it. A Txn mutates such a node in place
//     only if the node carries its current id; any other node is copied
//     first (path copying). CommitOnly draws a fresh id from a process-wide
//     counter, so nodes made before a commit are never mutated after it,
//     even when the Txn is used further. A leaf (a node without children)
//     carries no id, which keeps it small (see Node): it is never mutated,
//     a new value or child always replaces it.
//   - A node created in the current generation has only current-generation
//     ancestors, so an in-place change never needs to touch a parent.
//   - A node256 keeps its children in 16 chunks of 16 and marks those it
//     made itself; copying a node256 shares its chunks and marks none, and a
//     chunk the node did not make is copied before it is changed. So a
//     write below a full node256 copies one chunk and 16 pointers, not 256.
//   - Paths are absolute: a node stores path = the key bytes from the root to
//     the end of the node's own segment (a sub-slice of some inserted key,
//     never written to). A node holds a value iff its key equals its path, so
//     a leaf needs no separate key. Children are keyed by path[len(n.path)] of
//     the child. Because paths are absolute, a node whose parent disappears
//     (delete collapses a node with one child) moves up without being copied.
//   - Shape: every node except the root has a value or at least two children.
//     The root may have a path, a value, and any number of children, and is
//     never a bare leaf.
//   - Node kinds by fan-out: leaf (no children), 4, 16, 48 and 256 children,
//     each one allocation with its arrays embedded (a node256's chunks
//     apart); 4/16/48 keep their children sorted by label.
//
// # Watch channels
//
// Every node with children, every root and every leaf made by a Txn with
// TrackMutate(true) has a watch channel, created lazily on the first
// GetWatch or PrefixWatch that lands on it (so writes allocate none). A
// leaf made untracked, in a tree nobody watches, has none (it would cost
// every key a word): whoever watches it gets the channel of its parent,
// whose child pointer every change of the leaf rewrites. When a Txn with
// TrackMutate(true) replaces or removes a node of an earlier generation
// (for a watched leaf: any), it remembers the node; Notify then closes its
// channel, or, if none was ever created, installs an already closed one so
// that a later watcher on an old snapshot still sees the change. Rules
// that follow:
//
//   - GetWatch of a present key returns the channel of the node holding the
//     value, or of its parent if that is a bare leaf. It closes when that
//     value is replaced or deleted, and also (spuriously) when a key it is
//     a proper prefix of changes, or (for a bare leaf) a sibling changes.
//   - GetWatch of a missing key and PrefixWatch return the channel of the
//     deepest node with children on the search path; every insert, update
//     or delete that could change the answer replaces that node.
//   - A root is never a bare leaf (a tree of one key has a watched leaf at
//     its root, tracked or not), so Root().Watch() closes on any change to
//     the tree.
//   - A nil *Node reads as an empty tree whose channels are closed already:
//     there is nothing to wait for.
//   - As in iradix, a Txn with TrackMutate(false) (the default) closes
//     nothing; channels taken from trees written that way are only closed if
//     a later tracked Txn replaces their node. Changes made inside an
//     uncommitted Txn to nodes that Txn created close nothing either.
package radix
