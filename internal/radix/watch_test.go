package radix

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// build returns a tree holding keys, each with its index as value.
func build(keys ...string) *Tree[int] { return buildTracked(false, keys...) }

// buildTracked is build with tracking as given: a tracked Txn makes leaves
// with watch channels of their own, an untracked one bare leaves.
func buildTracked(track bool, keys ...string) *Tree[int] {
	txn := New[int]().Txn()
	txn.TrackMutate(track)
	for i, k := range keys {
		txn.Insert([]byte(k), i)
	}
	return txn.Commit()
}

// write commits fn's changes to tree with tracking on.
func write(tree *Tree[int], fn func(txn *Txn[int])) *Tree[int] {
	txn := tree.Txn()
	txn.TrackMutate(true)
	fn(txn)
	return txn.Commit()
}

func TestWatchCases(t *testing.T) {
	base := []string{"ab1", "ab2", "abcd1", "abcd2", "zz1", "zz2", "q"}
	type watchFn func(root *Node[int]) <-chan struct{}
	get := func(k string) watchFn {
		return func(root *Node[int]) <-chan struct{} { ch, _, _ := root.GetWatch([]byte(k)); return ch }
	}
	prefix := func(p string) watchFn {
		return func(root *Node[int]) <-chan struct{} { _, ch := root.PrefixWatch([]byte(p)); return ch }
	}
	ins := func(k string) func(*Txn[int]) { return func(txn *Txn[int]) { txn.Insert([]byte(k), 99) } }
	del := func(k string) func(*Txn[int]) { return func(txn *Txn[int]) { txn.Delete([]byte(k)) } }
	cases := []struct {
		name   string
		watch  watchFn
		change func(*Txn[int])
		closed bool
	}{
		{"get: update", get("ab1"), ins("ab1"), true},
		{"get: delete", get("ab1"), del("ab1"), true},
		{"get: insert missing", get("ab3"), ins("ab3"), true},
		{"get: insert missing mid-segment", get("abc"), ins("abc"), true},
		{"get: insert missing diverging", get("abx"), ins("abx"), true},
		{"get: far update", get("ab1"), ins("zz1"), false},
		// A bare leaf (made untracked) has no channel of its own: its
		// watchers get its parent's, which a change of a sibling closes too
		// (spuriously). A watched leaf's stays open (see the loop below).
		{"get: sibling update", get("ab1"), ins("ab2"), true},
		{"get: far insert", get("ab1"), ins("zz3"), false},
		{"get missing: far insert", get("ab3"), ins("zz3"), false},
		{"prefix: insert", prefix("ab"), ins("ab3"), true},
		{"prefix: update deep", prefix("ab"), ins("abcd2"), true},
		{"prefix: delete", prefix("abcd"), del("abcd1"), true},
		{"prefix mid-segment: split inside", prefix("abc"), ins("abcx"), true},
		{"prefix mid-segment: split at end", prefix("abc"), ins("abc"), true},
		{"prefix empty result: insert", prefix("abq"), ins("abq1"), true},
		{"prefix empty result: insert mid", prefix("zzz"), ins("zzz"), true},
		{"prefix: far insert", prefix("ab"), ins("zz3"), false},
		{"prefix: far delete", prefix("abcd"), del("ab1"), false},
		{"empty prefix: any change", prefix(""), ins("zz3"), true},
	}
	for _, tracked := range []bool{false, true} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/tracked=%v", tc.name, tracked), func(t *testing.T) {
				tree := buildTracked(tracked, base...)
				ch := tc.watch(tree.Root())
				if isClosed(ch) {
					t.Fatal("closed before any change")
				}
				write(tree, tc.change)
				want := tc.closed
				if tc.name == "get: sibling update" {
					want = !tracked
				}
				if got := isClosed(ch); got != want {
					t.Fatalf("closed = %v, want %v", got, want)
				}
			})
		}
	}
}

func TestWatchOldSnapshotAfterNotify(t *testing.T) {
	tree := build("a1", "a2", "b1")
	write(tree, func(txn *Txn[int]) { txn.Insert([]byte("a1"), 5) })
	// Watching the stale snapshot after the change must not block forever.
	if ch, _, _ := tree.Root().GetWatch([]byte("a1")); !isClosed(ch) {
		t.Fatal("watch on a stale snapshot is open")
	}
}

func TestWatchCommitOnlyThenNotify(t *testing.T) {
	tree := build("a1", "a2")
	ch, _, _ := tree.Root().GetWatch([]byte("a1"))
	txn := tree.Txn()
	txn.TrackMutate(true)
	txn.Insert([]byte("a1"), 7)
	txn.CommitOnly()
	if isClosed(ch) {
		t.Fatal("closed by CommitOnly")
	}
	txn.Notify()
	if !isClosed(ch) {
		t.Fatal("not closed by Notify")
	}
	txn.Notify() // again: a no-op
}

func TestWatchUntracked(t *testing.T) {
	tree := build("a1", "a2")
	ch, _, _ := tree.Root().GetWatch([]byte("a1"))
	txn := tree.Txn()
	txn.Insert([]byte("a1"), 7)
	txn.Commit()
	if isClosed(ch) {
		t.Fatal("closed by an untracked Txn")
	}
}

// TestWatchContinuedTxn checks that writes after CommitOnly close the
// channels of nodes created before it.
func TestWatchContinuedTxn(t *testing.T) {
	txn := build("a1", "a2").Txn()
	txn.TrackMutate(true)
	txn.Insert([]byte("a3"), 3)
	first := txn.Commit()
	ch, _, _ := first.Root().GetWatch([]byte("a3"))
	txn.Insert([]byte("a3"), 4)
	second := txn.Commit()
	if !isClosed(ch) {
		t.Fatal("watch from the first commit not closed by the second")
	}
	if v, _ := first.Get([]byte("a3")); v != 3 {
		t.Fatalf("first commit changed: a3 = %d", v)
	}
	if v, _ := second.Get([]byte("a3")); v != 4 {
		t.Fatalf("second commit: a3 = %d", v)
	}
}

// TestWatchModel takes random watches, applies a random tracked Txn, and
// checks that every watch whose answer changed was closed.
func TestWatchModel(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	tree, model := New[int](), map[string]int{}
	spurious, total := 0, 0
	for range 300 {
		type w struct {
			key, prefix []byte
			ch          <-chan struct{}
		}
		var watches []w
		for range 10 {
			k := randKey(r)
			ch, _, _ := tree.Root().GetWatch(k)
			watches = append(watches, w{key: k, ch: ch})
			p := k[:r.IntN(len(k)+1)]
			_, ch = tree.Root().PrefixWatch(p)
			watches = append(watches, w{prefix: p, ch: ch})
		}
		changed := map[string]bool{}
		tree = write(tree, func(txn *Txn[int]) {
			for range r.IntN(5) + 1 {
				k := randKey(r)
				if r.IntN(3) == 0 {
					if _, ok := txn.Delete(k); ok {
						changed[string(k)] = true
						delete(model, string(k))
					}
				} else {
					v := r.Int()
					txn.Insert(k, v)
					changed[string(k)] = true
					model[string(k)] = v
				}
			}
		})
		for _, w := range watches {
			relevant := false
			for k := range changed {
				if (w.key != nil && k == string(w.key)) || (w.key == nil && bytes.HasPrefix([]byte(k), w.prefix)) {
					relevant = true
				}
			}
			closed := isClosed(w.ch)
			if relevant && !closed {
				t.Fatalf("watch key=%x prefix=%x not closed after changes %v", w.key, w.prefix, changed)
			}
			if !relevant {
				total++
				if closed {
					spurious++
				}
			}
		}
	}
	t.Logf("spurious closes: %d of %d unaffected watches", spurious, total)
}

// A nil *Node is an empty tree whose watch channels are closed already.
func TestNilNode(t *testing.T) {
	var n *Node[int]
	for name, seq := range map[string]func(func([]byte, int) bool){
		"All":        n.All,
		"Prefix":     n.Prefix([]byte("a")).All,
		"LowerBound": func(yield func([]byte, int) bool) { n.LowerBound([]byte("a"), yield) },
		"Backward":   n.Backward,
		"ReverseLowerBound": func(yield func([]byte, int) bool) {
			n.ReverseLowerBound([]byte("a"), yield)
		},
		"Matches": func(yield func([]byte, int) bool) {
			n.Matches([]byte("a"), 0, func(int, *Node[int]) bool { return yield(nil, 0) })
		},
	} {
		for k := range seq {
			t.Errorf("%s of a nil node yielded %x", name, k)
		}
	}
	if _, _, ok := n.Minimum(); ok {
		t.Error("Minimum of a nil node found something")
	}
	if _, _, ok := n.Maximum(); ok {
		t.Error("Maximum of a nil node found something")
	}
	sub, prefixCh := n.PrefixWatch(nil)
	if sub != nil {
		t.Error("PrefixWatch of a nil node returned a subtree")
	}
	getCh, _, found := n.GetWatch([]byte("a"))
	if found {
		t.Error("GetWatch of a nil node found something")
	}
	for name, ch := range map[string]<-chan struct{}{"Watch": n.Watch(), "PrefixWatch": prefixCh, "GetWatch": getCh} {
		select {
		case <-ch:
		default:
			t.Errorf("%s of a nil node: the channel is open, want closed", name)
		}
	}
}
