package filesource

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/steadystate/steadystate/reflector"
)

// firstDiff orders the items as a sort of their tables and keys as
// strings does (the model), and finds the same keys given twice, for keys
// that share long prefixes, are prefixes of each other, differ only past
// 8 bytes of the shared prefix, or hold zero bytes.
func TestFirstDiffOrder(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 3))
		prefixes := []string{"", "254/10.", "filter/INPUT/rule-", strings.Repeat("p", 20)}
		alphabet := "\x00ab9./\xff"
		var items []reflector.Item[int]
		for i := range rng.IntN(200) {
			key := prefixes[rng.IntN(len(prefixes))]
			for range rng.IntN(12) {
				key += string(alphabet[rng.IntN(len(alphabet))])
			}
			items = append(items, reflector.Item[int]{Table: fmt.Sprint("t", rng.IntN(3)), Key: key, Value: i})
		}
		got, err := firstDiff("f", items)

		order := make([]int, len(items))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int {
			return cmp.Or(strings.Compare(items[a].Table, items[b].Table), strings.Compare(items[a].Key, items[b].Key))
		})
		var want []int
		var twice []int
		for n, i := range order {
			if n > 0 && items[order[n-1]].Table == items[i].Table && items[order[n-1]].Key == items[i].Key {
				twice = append(twice, i)
				continue
			}
			want = append(want, i)
		}
		if len(twice) > 0 {
			if wantErr := givenTwice("f", items, twice); err == nil || err.Error() != wantErr.Error() {
				t.Fatalf("seed %d: error %v, want %v", seed, err, wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got.put, want) {
			t.Fatalf("seed %d: put %v, %v; want %v", seed, got.put, err, want)
		}
	}
}
