package radix

import (
	"maps"
	"math/rand/v2"
	"testing"
)

// FuzzOps decodes data into Insert/Delete/commit operations, runs them
// against the tree and a map, and checks both agree, including every
// snapshot committed along the way.
func FuzzOps(f *testing.F) {
	f.Add([]byte("\x00\x03abc\x00\x02ab\x01\x03abc\x02\x00\x01"))
	f.Add([]byte("\x00\x00\x00\x01a\x01\x00\x02\x00\x01a"))
	f.Add([]byte("\x00\x08\x00\x00\x00\x00\x00\x00\x00\x01\x00\x08\x00\x00\x00\x00\x00\x00\x01\x01\x02"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4096 {
			data = data[:4096] // longer inputs add time, not coverage
		}
		r := rand.New(rand.NewPCG(uint64(len(data)), 1))
		tree, model := New[int](), map[string]int{}
		txn := tree.Txn()
		txn.TrackMutate(true)
		var snaps []snapshot
		for i := 0; len(data) > 0; i++ {
			op := data[0] % 3
			data = data[1:]
			if op == 2 {
				snaps = append(snaps, snapshot{txn.Commit(), maps.Clone(model)})
				continue
			}
			if len(data) == 0 {
				break
			}
			n := min(int(data[0]%16), len(data)-1)
			key := data[1 : 1+n : 1+n]
			data = data[1+n:]
			if op == 0 {
				old, had := txn.Insert(key, i)
				mOld, mHad := model[string(key)]
				if old != mOld || had != mHad {
					t.Fatalf("Insert(%x) = %d,%v; want %d,%v", key, old, had, mOld, mHad)
				}
				model[string(key)] = i
			} else {
				old, had := txn.Delete(key)
				mOld, mHad := model[string(key)]
				if old != mOld || had != mHad {
					t.Fatalf("Delete(%x) = %d,%v; want %d,%v", key, old, had, mOld, mHad)
				}
				delete(model, string(key))
			}
		}
		snaps = append(snaps, snapshot{txn.Commit(), maps.Clone(model)})
		// Check the last snapshot and about 16 spread over the run.
		step := max(1, len(snaps)/16)
		for i := len(snaps) - 1; i >= 0; i -= step {
			checkTreeProbes(t, snaps[i].tree.Root(), snaps[i].tree.Len(), snaps[i].model, r, 3)
		}
	})
}
