package radix

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	iradix "github.com/hashicorp/go-immutable-radix/v2"
)

// snapshot is a committed tree with the model it must keep matching.
type snapshot struct {
	tree  *Tree[int]
	model map[string]int
}

// TestModel runs random transactions against the tree, a map and iradix,
// and checks after every commit that all three agree and that every earlier
// snapshot is unchanged.
func TestModel(t *testing.T) {
	for seed := range uint64(4) {
		r := rand.New(rand.NewPCG(seed, 42))
		tree, ref := New[int](), iradix.New[int]()
		model := map[string]int{}
		var snaps []snapshot
		for range 80 {
			txn, refTxn := tree.Txn(), ref.Txn()
			txn.TrackMutate(r.IntN(2) == 0)
			for range r.IntN(60) + 1 {
				k := randKey(r)
				switch op := r.IntN(10); {
				case op < 5:
					v := r.Int()
					old, had := txn.Insert(k, v)
					refOld, refHad := refTxn.Insert(k, v)
					mOld, mHad := model[string(k)]
					if old != refOld || had != refHad || old != mOld || had != mHad {
						t.Fatalf("Insert(%x) = %d,%v; iradix %d,%v; map %d,%v", k, old, had, refOld, refHad, mOld, mHad)
					}
					model[string(k)] = v
				case op < 8:
					old, had := txn.Delete(k)
					refOld, refHad := refTxn.Delete(k)
					mOld, mHad := model[string(k)]
					if old != refOld || had != refHad || old != mOld || had != mHad {
						t.Fatalf("Delete(%x) = %d,%v; iradix %d,%v; map %d,%v", k, old, had, refOld, refHad, mOld, mHad)
					}
					delete(model, string(k))
				case op < 9:
					v, ok := txn.Get(k)
					mv, mok := model[string(k)]
					if v != mv || ok != mok {
						t.Fatalf("Txn.Get(%x) = %d,%v; want %d,%v", k, v, ok, mv, mok)
					}
				default:
					// Commit in the middle and keep writing.
					snaps = append(snaps, snapshot{txn.CommitOnly(), maps.Clone(model)})
					txn.Notify()
				}
				if txn.Len() != len(model) {
					t.Fatalf("Txn.Len = %d, want %d", txn.Len(), len(model))
				}
			}
			tree, ref = txn.Commit(), refTxn.Commit()
			snaps = append(snaps, snapshot{tree, maps.Clone(model)})
			checkTree(t, tree.Root(), tree.Len(), model, r)
			compareWithIradix(t, tree, ref)
			old := snaps[r.IntN(len(snaps))]
			checkTreeProbes(t, old.tree.Root(), old.tree.Len(), old.model, r, 2)
		}
		for _, s := range snaps {
			checkTreeProbes(t, s.tree.Root(), s.tree.Len(), s.model, r, 0)
		}
	}
}

// compareWithIradix checks that full iteration agrees with iradix.
func compareWithIradix(t *testing.T, tree *Tree[int], ref *iradix.Tree[int]) {
	t.Helper()
	var want []kv
	it := ref.Root().Iterator()
	for k, v, ok := it.Next(); ok; k, v, ok = it.Next() {
		want = append(want, kv{string(k), v})
	}
	if got := collectIter(tree.Root().Iterator()); !slices.Equal(got, want) {
		t.Fatalf("iteration differs from iradix:\n got %v\nwant %v", got, want)
	}
	if tree.Len() != ref.Len() {
		t.Fatalf("Len %d, iradix %d", tree.Len(), ref.Len())
	}
}

// TestDenseNodes grows one node through every kind and shrinks it back.
func TestDenseNodes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	tree := New[int]()
	model := map[string]int{}
	order := r.Perm(256)
	for i, b := range order {
		txn := tree.Txn()
		txn.Insert([]byte{'x', byte(b)}, i)
		model[string([]byte{'x', byte(b)})] = i
		tree = txn.Commit()
		checkTree(t, tree.Root(), tree.Len(), model, r)
	}
	for _, b := range r.Perm(256) {
		txn := tree.Txn()
		txn.Delete([]byte{'x', byte(b)})
		delete(model, string([]byte{'x', byte(b)}))
		tree = txn.Commit()
		checkTree(t, tree.Root(), tree.Len(), model, r)
	}
}

// TestEdgeKeys covers the empty key and keys that are prefixes of others.
func TestEdgeKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	keys := []string{"", "a", "ab", "abc", "abd", "b", "\x00", "\xff", "abcdef"}
	for range 50 {
		tree := New[int]()
		model := map[string]int{}
		for _, i := range r.Perm(len(keys)) {
			txn := tree.Txn()
			txn.Insert([]byte(keys[i]), i)
			model[keys[i]] = i
			tree = txn.Commit()
			checkTree(t, tree.Root(), tree.Len(), model, r)
		}
		for _, i := range r.Perm(len(keys)) {
			txn := tree.Txn()
			if _, ok := txn.Delete([]byte(keys[i])); !ok {
				t.Fatalf("Delete(%q) found nothing", keys[i])
			}
			delete(model, keys[i])
			tree = txn.Commit()
			checkTree(t, tree.Root(), tree.Len(), model, r)
		}
	}
}

// TestNode256SharesChunks: a write into a full node256 copies the one chunk
// it changes and shares the other fifteen with the version it came from,
// which stays as it was; a second write into the same chunk in the same
// generation changes the copy in place.
func TestNode256SharesChunks(t *testing.T) {
	tree := New[int]()
	txn := tree.Txn()
	model := map[string]int{}
	for b := range 256 {
		txn.Insert([]byte{'x', byte(b)}, b)
		model[string([]byte{'x', byte(b)})] = b
	}
	old := txn.Commit()
	oldModel := maps.Clone(model)

	txn = old.Txn()
	txn.Insert([]byte{'x', 0x37}, -1)
	txn.Insert([]byte{'x', 0x3a}, -2)
	model["x\x37"], model["x\x3a"] = -1, -2
	cur := txn.Commit()

	o, c := old.Root(), cur.Root()
	if o.kind != kind256 || c.kind != kind256 {
		t.Fatalf("roots of kinds %d and %d, want node256", o.kind, c.kind)
	}
	for hi := range 16 {
		shared := o.as256().chunks[hi] == c.as256().chunks[hi]
		if shared != (hi != 3) {
			t.Errorf("chunk %x shared: %v", hi, shared)
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	checkTree(t, old.Root(), old.Len(), oldModel, r)
	checkTree(t, cur.Root(), cur.Len(), model, r)
}

// TestInsertCopy: keys inserted with InsertCopy from one scratch buffer,
// overwritten after every call, are all in the tree as they were given:
// the tree kept copies of new keys and nothing of existing ones. An
// existing key is found again without an allocation.
func TestInsertCopy(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	tree := New[int]()
	model := map[string]int{}
	scratch := make([]byte, 0, 16)
	for round := range 30 {
		txn := tree.Txn()
		txn.TrackMutate(round%2 == 0)
		for range 100 {
			k := randKey(r)
			scratch = append(scratch[:0], k...)
			v := r.Int()
			old, had := txn.InsertCopy(scratch, v)
			mOld, mHad := model[string(k)]
			if old != mOld || had != mHad {
				t.Fatalf("InsertCopy(%x) = %d,%v; want %d,%v", k, old, had, mOld, mHad)
			}
			model[string(k)] = v
			for i := range scratch {
				scratch[i] ^= 0xa5 // the tree must not see this
			}
			if r.IntN(4) == 0 {
				scratch = append(scratch[:0], randKey(r)...)
				txn.Delete(scratch)
				delete(model, string(scratch))
			}
		}
		tree = txn.Commit()
		checkTree(t, tree.Root(), tree.Len(), model, r)
	}
	txn := tree.Txn()
	for k := range model {
		scratch = append(scratch[:0], k...)
		// After the warm-up run owns the path, only a leaf (never changed
		// in place) is copied: one allocation, none for the key.
		if n := testing.AllocsPerRun(1, func() { txn.InsertCopy(scratch, 1) }); n > 1 {
			t.Fatalf("InsertCopy of an existing key allocated %v times", n)
		}
		break
	}
}
