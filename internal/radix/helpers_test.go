package radix

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// randKey draws keys that share prefixes often, are prefixes of each other,
// include the empty key, and fill wide nodes (48/256 children).
func randKey(r *rand.Rand) []byte {
	switch r.IntN(4) {
	case 0:
		return binary.BigEndian.AppendUint64(nil, uint64(r.IntN(3000)))
	case 1:
		b := make([]byte, r.IntN(4))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return b
	default:
		b := make([]byte, r.IntN(7))
		for i := range b {
			b[i] = "ab\x00\xffc"[r.IntN(5)]
		}
		return b
	}
}

// sortedKeys returns the model's keys in byte order.
func sortedKeys(model map[string]int) []string {
	keys := make([]string, 0, len(model))
	for k := range model {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

type kv struct {
	k string
	v int
}

func collectIter(it *Iterator[int]) []kv {
	var out []kv
	for k, v, ok := it.Next(); ok; k, v, ok = it.Next() {
		out = append(out, kv{string(k), v})
	}
	return out
}

func collectSeq(seq func(func([]byte, int) bool)) []kv {
	var out []kv
	for k, v := range seq {
		out = append(out, kv{string(k), v})
	}
	return out
}

func expect(all []kv, keep func(string) bool) []kv {
	var out []kv
	for _, e := range all {
		if keep(e.k) {
			out = append(out, e)
		}
	}
	return out
}

// checkTree compares everything readable from root with the model and
// checks the structural invariants stated in doc.go.
func checkTree(t testing.TB, root *Node[int], size int, model map[string]int, r *rand.Rand) {
	checkTreeProbes(t, root, size, model, r, 20)
}

// checkTreeProbes is checkTree with the given number of random probes.
func checkTreeProbes(t testing.TB, root *Node[int], size int, model map[string]int, r *rand.Rand, probes int) {
	t.Helper()
	if size != len(model) {
		t.Fatalf("Len = %d, model has %d", size, len(model))
	}
	if n := checkShape(t, root, nil, true); n != len(model) {
		t.Fatalf("tree holds %d values, model has %d", n, len(model))
	}
	for k, v := range model {
		got, ok := root.Get([]byte(k))
		if !ok || got != v {
			t.Fatalf("Get(%x) = %d, %v; want %d", k, got, ok, v)
		}
		_, got, ok = root.GetWatch([]byte(k))
		if !ok || got != v {
			t.Fatalf("GetWatch(%x) = %d, %v; want %d", k, got, ok, v)
		}
	}
	var all []kv
	for _, k := range sortedKeys(model) {
		all = append(all, kv{k, model[k]})
	}
	if got := collectIter(root.Iterator()); !slices.Equal(got, all) {
		t.Fatalf("Iterator: got %v, want %v", got, all)
	}
	if got := collectSeq(root.All); !slices.Equal(got, all) {
		t.Fatalf("All: got %v, want %v", got, all)
	}
	minK, minV, minOK := root.Minimum()
	maxK, maxV, maxOK := root.Maximum()
	if len(all) == 0 {
		if minOK || maxOK {
			t.Fatalf("Minimum/Maximum of empty tree found something")
		}
	} else if string(minK) != all[0].k || minV != all[0].v || !minOK ||
		string(maxK) != all[len(all)-1].k || maxV != all[len(all)-1].v || !maxOK {
		t.Fatalf("Minimum/Maximum = %x/%x, want %x/%x", minK, maxK, all[0].k, all[len(all)-1].k)
	}
	for range probes {
		k := randKey(r)
		if _, ok := model[string(k)]; !ok {
			if _, ok := root.Get(k); ok {
				t.Fatalf("Get(%x) found a missing key", k)
			}
			if _, _, ok := root.GetWatch(k); ok {
				t.Fatalf("GetWatch(%x) found a missing key", k)
			}
		}
		prefix := k[:r.IntN(len(k)+1)]
		want := expect(all, func(s string) bool { return bytes.HasPrefix([]byte(s), prefix) })
		if got := collectSeq(root.Prefix(prefix).All); !slices.Equal(got, want) {
			t.Fatalf("Prefix(%x): got %v, want %v", prefix, got, want)
		}
		if k0, v0, ok := root.Prefix(prefix).Minimum(); ok != (len(want) > 0) || ok && (string(k0) != want[0].k || v0 != want[0].v) {
			t.Fatalf("Prefix(%x).Minimum() = %x, %d, %v; want the first of %v", prefix, k0, v0, ok, want)
		}
		if sub, _ := root.PrefixWatch(prefix); sub != root.Prefix(prefix) {
			t.Fatalf("PrefixWatch(%x) and Prefix disagree on the subtree", prefix)
		}
		want = expect(all, func(s string) bool { return s >= string(k) })
		it := root.Iterator()
		it.SeekLowerBound(k)
		if got := collectIter(it); !slices.Equal(got, want) {
			t.Fatalf("SeekLowerBound(%x): got %v, want %v", k, got, want)
		}
		if got := collectSeq(func(yield func([]byte, int) bool) { root.LowerBound(k, yield) }); !slices.Equal(got, want) {
			t.Fatalf("LowerBound(%x): got %v, want %v", k, got, want)
		}
		want = expect(all, func(s string) bool { return s <= string(k) })
		slices.Reverse(want)
		if got := collectSeq(func(yield func([]byte, int) bool) { root.ReverseLowerBound(k, yield) }); !slices.Equal(got, want) {
			t.Fatalf("ReverseLowerBound(%x): got %v, want %v", k, got, want)
		}
		if len(want) > 0 {
			// Stopping early yields exactly the first keys.
			stop := r.IntN(len(want)) + 1
			var got []kv
			root.ReverseLowerBound(k, func(k []byte, v int) bool { got = append(got, kv{string(k), v}); return len(got) < stop })
			if !slices.Equal(got, want[:stop]) {
				t.Fatalf("ReverseLowerBound(%x) stopped after %d: got %v, want %v", k, stop, got, want[:stop])
			}
		}
		checkMatches(t, root, k, all)
	}
	backward := slices.Clone(all)
	slices.Reverse(backward)
	if got := collectSeq(root.Backward); !slices.Equal(got, backward) {
		t.Fatalf("Backward: got %v, want %v", got, backward)
	}
	for stop := 1; stop < len(backward); stop *= 3 {
		var got []kv
		root.Backward(func(k []byte, v int) bool { got = append(got, kv{string(k), v}); return len(got) < stop })
		if !slices.Equal(got, backward[:stop]) {
			t.Fatalf("Backward stopped after %d: got %v, want %v", stop, got, backward[:stop])
		}
	}
}

// checkMatches compares Matches of k (with a separator that k does not
// contain) with a scan of all, the tree's content in key order.
func checkMatches(t testing.TB, root *Node[int], k []byte, all []kv) {
	t.Helper()
	sep := -1
	for _, b := range []byte("\x00ab\xffc") {
		if bytes.IndexByte(k, b) < 0 {
			sep = int(b)
			break
		}
	}
	if sep < 0 {
		return
	}
	type group struct {
		d    int
		keys []kv
	}
	var want, got []group
	for d := len(k); d >= 0; d-- {
		g := append(bytes.Clone(k[:d]), byte(sep))
		if keys := expect(all, func(s string) bool { return bytes.HasPrefix([]byte(s), g) }); keys != nil {
			want = append(want, group{d, keys})
		}
	}
	root.Matches(k, byte(sep), func(d int, sub *Node[int]) bool {
		got = append(got, group{d, collectSeq(sub.All)})
		return true
	})
	if !slices.EqualFunc(got, want, func(a, b group) bool { return a.d == b.d && slices.Equal(a.keys, b.keys) }) {
		t.Fatalf("Matches(%x, %x): got %v, want %v", k, sep, got, want)
	}
	if len(want) > 1 {
		n := 0
		root.Matches(k, byte(sep), func(int, *Node[int]) bool { n++; return false })
		if n != 1 {
			t.Fatalf("Matches(%x, %x) went on after yield returned false", k, sep)
		}
	}
}

// checkShape verifies the node invariants below n and counts its values.
func checkShape(t testing.TB, n *Node[int], parent []byte, isRoot bool) int {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("node %x (kind %d): %s", n.path(), n.kind, fmt.Sprintf(format, args...))
	}
	if !isRoot && (len(n.path()) <= len(parent) || !bytes.HasPrefix(n.path(), parent)) {
		fail("path does not extend parent path %x", parent)
	}
	if !isRoot && !n.leaf && n.size < 2 {
		fail("inner node with %d children and no value", n.size)
	}
	if isRoot && n.kind == kindLeaf {
		fail("the root is a bare leaf (it has no watch channel)")
	}
	if int(n.size) > n.kind.capacity() {
		fail("size %d over capacity", n.size)
	}
	count := 0
	if n.leaf {
		count++
	}
	seen, last := 0, -1
	for c, label, pos := n.nextChild(0); c != nil; c, label, pos = n.nextChild(pos) {
		seen++
		if int(label) <= last {
			fail("labels out of order")
		}
		last = int(label)
		if c.path()[len(n.path())] != label {
			fail("child %x under wrong label %x", c.path(), label)
		}
		if n.child(label) != c {
			fail("child(%x) disagrees with iteration", label)
		}
		count += checkShape(t, c, n.path(), false)
	}
	if seen != int(n.size) {
		fail("size %d but %d children", n.size, seen)
	}
	if n.kind == kind256 {
		for hi, ch := range &n.as256().chunks {
			if ch == nil {
				continue
			}
			if ch.children == [16]*Node[int]{} {
				fail("empty chunk %d", hi)
			}
		}
	}
	return count
}
