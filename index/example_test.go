package index_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"

	"github.com/steadystate/steadystate/index"
)

// Keys sort like the values they encode, so a radix tree of them is an
// ordered index: here, negative numbers before positive ones.
func ExampleInt64() {
	keys := []index.Key{index.Int64(10), index.Int64(-3), index.Int64(0)}
	slices.SortFunc(keys, func(a, b index.Key) int { return bytes.Compare(a, b) })
	for _, k := range keys {
		fmt.Printf("%x\n", []byte(k))
	}
	// Output:
	// 7ffffffffffffffd
	// 8000000000000000
	// 800000000000000a
}

// An object with several values in one index (tags, addresses) has one key
// per value.
func ExampleNewKeySet() {
	addrs := []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("2001:db8::1")}
	keys := make([]index.Key, len(addrs))
	for i, a := range addrs {
		keys[i] = index.NetIPAddr(a)
	}
	ks := index.NewKeySet(keys...)
	fmt.Println(ks.Len())
	// Output: 2
}
