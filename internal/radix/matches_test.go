package radix

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMatches stores keys in the layout of statedb's LPM index (a bit
// string over '0' and '1', the separator 0x00, an id) and checks Matches
// against a scan for random query strings, as the tree grows and shrinks:
// sparse trees put groups inside compressed segments, dense ones at the
// end of a node's path.
func TestMatches(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	bits := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = '0' + byte(r.IntN(2))
		}
		return b
	}
	tree := New[int]()
	model := map[string]int{}
	for round := range 300 {
		txn := tree.Txn()
		for range r.IntN(8) + 1 {
			if len(model) > 0 && r.IntN(3) == 0 {
				keys := sortedKeys(model)
				k := keys[r.IntN(len(keys))]
				txn.Delete([]byte(k))
				delete(model, k)
				continue
			}
			k := append(bits(r.IntN(9)), 0, byte('a'+r.IntN(3)))
			txn.Insert(k, round)
			model[string(k)] = round
		}
		tree = txn.Commit()
		var all []kv
		for _, k := range sortedKeys(model) {
			all = append(all, kv{k, model[k]})
		}
		for range 10 {
			checkMatches(t, tree.Root(), bits(r.IntN(11)), all)
		}
	}
	if !slices.Equal(collectSeq(tree.Root().All), func() []kv {
		var out []kv
		for _, k := range sortedKeys(model) {
			out = append(out, kv{k, model[k]})
		}
		return out
	}()) {
		t.Fatal("tree and model differ")
	}
}

// TestMatchesEmpty covers the empty tree.
func TestMatchesEmpty(t *testing.T) {
	calls := 0
	count := func(int, *Node[int]) bool { calls++; return true }
	New[int]().Root().Matches([]byte("01"), 0, count)
	New[int]().Root().Matches(nil, 0, count)
	if calls != 0 {
		t.Fatalf("Matches on an empty tree yielded %d groups", calls)
	}
}
