package filesource

import (
	"cmp"
	"slices"
	"strings"

	"github.com/steadystate/steadystate/reflector"
)

// firstDiff is diff from nothing: every item is new, in key order, a key
// given twice an error. The items are sorted by their tables' ranks and
// 8 bytes of their keys, as numbers, with a radix sort; only keys that
// tie there are compared as strings. A start's 60,000 items were sorted
// in 8 ms as strings, in 4 ms so.
func firstDiff[In any](path string, items []reflector.Item[In]) (change, error) {
	var tables []string
	for i := range items {
		if !slices.Contains(tables, items[i].Table) {
			tables = append(tables, items[i].Table)
		}
	}
	slices.Sort(tables)
	// Each entry has 8 bytes of its key past its table's common prefix (a
	// start's 50,000 routes all begin "254/10."), which order the keys but
	// where they tie.
	type entry struct {
		pre   uint64
		table int32 // its rank in tables
		i     int32
	}
	es := make([]entry, len(items))
	common := make([]int, len(tables)) // the common prefix of each table's keys
	firstKey := make([]int, len(tables))
	for t := range firstKey {
		firstKey[t] = -1
	}
	for i := range items {
		t := slices.Index(tables, items[i].Table)
		es[i] = entry{table: int32(t), i: int32(i)}
		if firstKey[t] < 0 {
			firstKey[t], common[t] = i, len(items[i].Key)
		} else {
			common[t] = commonPrefix(items[firstKey[t]].Key[:common[t]], items[i].Key)
		}
	}
	for n := range es {
		es[n].pre = prefix8(items[es[n].i].Key, common[es[n].table])
	}
	// A radix sort, least significant byte first, each pass stable: by
	// pre, then by table; entries that tie stay in file order.
	buf := make([]entry, len(es))
	for shift := uint(0); shift < 64 && len(es) > 0; shift += 8 {
		var count [256]int
		for _, e := range es {
			count[byte(e.pre>>shift)]++
		}
		if count[byte(es[0].pre>>shift)] == len(es) {
			continue // one value: nothing moves
		}
		at := 0
		for d, n := range count {
			count[d] = at
			at += n
		}
		for _, e := range es {
			d := byte(e.pre >> shift)
			buf[count[d]] = e
			count[d]++
		}
		es, buf = buf, es
	}
	// Then by table, the most significant digit (a file has a few).
	if len(tables) > 256 {
		slices.SortStableFunc(es, func(a, b entry) int { return cmp.Compare(a.table, b.table) })
	} else if len(tables) > 1 {
		var count [256]int
		for _, e := range es {
			count[e.table]++
		}
		at := 0
		for d, n := range count {
			count[d] = at
			at += n
		}
		for _, e := range es {
			buf[count[e.table]] = e
			count[e.table]++
		}
		es = buf
	}
	for lo := 0; lo < len(es); {
		hi := lo + 1
		for hi < len(es) && es[hi].table == es[lo].table && es[hi].pre == es[lo].pre {
			hi++
		}
		if hi-lo > 1 {
			slices.SortFunc(es[lo:hi], func(a, b entry) int {
				return cmp.Or(strings.Compare(items[a.i].Key, items[b.i].Key), cmp.Compare(a.i, b.i))
			})
		}
		lo = hi
	}
	c := change{put: make([]int, 0, len(es))}
	var twice []int
	for n, e := range es {
		if n > 0 && es[n-1].table == e.table && items[es[n-1].i].Key == items[e.i].Key {
			twice = append(twice, int(e.i)) // its first (in file order) came before it
			continue
		}
		c.put = append(c.put, int(e.i))
	}
	if len(twice) > 0 {
		return change{}, givenTwice(path, items, twice)
	}
	return c, nil
}

// commonPrefix returns the length of the common prefix of a and b.
func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// prefix8 is the 8 bytes of key from at on, big-endian, zero-padded: for
// keys that share their first at bytes, a < b gives prefix8(a) <=
// prefix8(b) (a shorter key pads with the least byte), so it orders them
// but where it ties.
func prefix8(key string, at int) uint64 {
	var p uint64
	for i := range 8 {
		p <<= 8
		if at+i < len(key) {
			p |= uint64(key[at+i])
		}
	}
	return p
}
