package index

import (
	"bytes"
	"cmp"
	"math"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sign reduces a comparison result to -1, 0 or 1.
func sign(c int) int { return cmp.Compare(c, 0) }

// checkOrder fails unless bytes.Compare of the encodings agrees with cmpFn
// on every pair of values.
func checkOrder[T any](t *testing.T, values []T, encode func(T) Key, cmpFn func(a, b T) int) {
	t.Helper()
	for _, a := range values {
		for _, b := range values {
			if got, want := sign(bytes.Compare(encode(a), encode(b))), sign(cmpFn(a, b)); got != want {
				t.Errorf("order of %v vs %v: keys compare %d, values %d (%x vs %x)", a, b, got, want, encode(a), encode(b))
			}
		}
	}
}

func TestIntegerOrder(t *testing.T) {
	ints := []int64{math.MinInt64, math.MinInt64 + 1, -1 << 40, -256, -255, -1, 0, 1, 255, 256, 1 << 40, math.MaxInt64 - 1, math.MaxInt64}
	checkOrder(t, ints, Int64, cmp.Compare[int64])
	checkOrder(t, []int{math.MinInt, -1, 0, 1, math.MaxInt}, Int, cmp.Compare[int])
	checkOrder(t, []uint64{0, 1, 255, 256, 1 << 32, math.MaxUint64}, Uint64, cmp.Compare[uint64])
	checkOrder(t, []uint32{0, 1, 255, 256, math.MaxUint32}, Uint32, cmp.Compare[uint32])
	checkOrder(t, []uint16{0, 1, 255, 256, math.MaxUint16}, Uint16, cmp.Compare[uint16])
	checkOrder(t, []bool{false, true}, Bool, func(a, b bool) int {
		if a == b {
			return 0
		}
		if !a {
			return -1
		}
		return 1
	})
	if len(Int(-1)) != 8 || len(Int(1<<40)) != 8 {
		t.Fatal("Int must use the full 64 bits")
	}
	if !bytes.Equal(Int(-5), Int64(-5)) {
		t.Fatal("Int and Int64 must encode alike")
	}
}

func TestStringOrder(t *testing.T) {
	checkOrder(t, []string{"", "a", "a\x00", "ab", "b", "ba", "\xff"}, String, cmp.Compare[string])
	if !bytes.Equal(Stringer(netip.MustParseAddr("10.0.0.1")), String("10.0.0.1")) {
		t.Fatal("Stringer must encode s.String()")
	}
	if !bytes.Equal(Bytes([]byte("xy")), Key("xy")) {
		t.Fatal("Bytes must keep the bytes")
	}
}

func TestAddrOrder(t *testing.T) {
	addrs := []netip.Addr{
		{},
		netip.MustParseAddr("0.0.0.0"),
		netip.MustParseAddr("9.255.255.255"),
		netip.MustParseAddr("10.0.0.1"),
		netip.MustParseAddr("10.0.0.2"),
		netip.MustParseAddr("192.168.1.1"),
		netip.MustParseAddr("255.255.255.255"),
		netip.MustParseAddr("::"),
		netip.MustParseAddr("::1"),
		netip.MustParseAddr("::ffff:10.0.0.1"),
		netip.MustParseAddr("2001:db8::1"),
		netip.MustParseAddr("fe80::1"),
		netip.MustParseAddr("fe80::1%eth0"),
		netip.MustParseAddr("fe80::1%eth1"),
		netip.MustParseAddr("fe80::2"),
	}
	checkOrder(t, addrs, NetIPAddr, netip.Addr.Compare)
}

func TestPrefixOrder(t *testing.T) {
	prefixes := []netip.Prefix{
		{},
		netip.MustParsePrefix("0.0.0.0/0"),
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("10.0.0.0/16"),
		netip.MustParsePrefix("10.0.0.0/24"),
		netip.MustParsePrefix("10.1.0.0/16"),
		netip.MustParsePrefix("192.168.0.0/16"),
		netip.MustParsePrefix("::/0"),
		netip.MustParsePrefix("2001:db8::/32"),
		netip.MustParsePrefix("2001:db8::/48"),
		netip.MustParsePrefix("2001:db8:1::/48"),
	}
	checkOrder(t, prefixes, NetIPPrefix, comparePrefix)
}

// comparePrefix is the documented order: family, address, length.
func comparePrefix(a, b netip.Prefix) int {
	if a.IsValid() != b.IsValid() {
		if !a.IsValid() {
			return -1
		}
		return 1
	}
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return cmp.Compare(a.Bits(), b.Bits())
}

func TestKeySet(t *testing.T) {
	cases := [][]Key{nil, {String("a")}, {String("a"), String("b"), String("c")}}
	for _, keys := range cases {
		ks := NewKeySet(keys...)
		if ks.Len() != len(keys) {
			t.Fatalf("Len = %d, want %d", ks.Len(), len(keys))
		}
		var all, each []Key
		for k := range ks.All() {
			all = append(all, k)
		}
		ks.Foreach(func(k Key) { each = append(each, k) })
		for i := range keys {
			if !bytes.Equal(ks.At(i), keys[i]) || !bytes.Equal(all[i], keys[i]) || !bytes.Equal(each[i], keys[i]) {
				t.Fatalf("key %d differs", i)
			}
		}
		if len(all) != len(keys) || len(each) != len(keys) {
			t.Fatalf("iterated %d/%d keys, want %d", len(all), len(each), len(keys))
		}
	}
	// The caller's slice is not retained.
	keys := []Key{String("a"), String("b")}
	ks := NewKeySet(keys...)
	keys[1] = String("z")
	if !bytes.Equal(ks.At(1), String("b")) {
		t.Fatal("NewKeySet retained the caller's slice")
	}
	if n := testing.AllocsPerRun(100, func() { _ = NewKeySet(keys[0]) }); n != 0 {
		t.Fatalf("single-key KeySet allocates %v times", n)
	}
}

func FuzzInt64Order(f *testing.F) {
	f.Add(int64(0), int64(-1))
	f.Add(int64(math.MinInt64), int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, a, b int64) {
		if sign(bytes.Compare(Int64(a), Int64(b))) != cmp.Compare(a, b) {
			t.Fatalf("Int64 order of %d, %d", a, b)
		}
		if sign(bytes.Compare(Uint64(uint64(a)), Uint64(uint64(b)))) != cmp.Compare(uint64(a), uint64(b)) {
			t.Fatalf("Uint64 order of %d, %d", uint64(a), uint64(b))
		}
		if sign(bytes.Compare(Uint32(uint32(a)), Uint32(uint32(b)))) != cmp.Compare(uint32(a), uint32(b)) {
			t.Fatalf("Uint32 order of %d, %d", uint32(a), uint32(b))
		}
		if sign(bytes.Compare(Uint16(uint16(a)), Uint16(uint16(b)))) != cmp.Compare(uint16(a), uint16(b)) {
			t.Fatalf("Uint16 order of %d, %d", uint16(a), uint16(b))
		}
	})
}

func FuzzStringOrder(f *testing.F) {
	f.Add("a", "ab")
	f.Add("", "\x00")
	f.Fuzz(func(t *testing.T, a, b string) {
		if sign(bytes.Compare(String(a), String(b))) != cmp.Compare(a, b) {
			t.Fatalf("String order of %q, %q", a, b)
		}
	})
}

func FuzzAddrOrder(f *testing.F) {
	f.Add([]byte{10, 0, 0, 1}, []byte{10, 0, 0, 2}, "", "")
	f.Add(make([]byte, 16), []byte{1, 2, 3, 4}, "eth0", "")
	f.Fuzz(func(t *testing.T, ab, bb []byte, za, zb string) {
		a, okA := netip.AddrFromSlice(ab)
		b, okB := netip.AddrFromSlice(bb)
		if !okA || !okB {
			return
		}
		if a.Is6() {
			a = a.WithZone(za)
		}
		if b.Is6() {
			b = b.WithZone(zb)
		}
		if sign(bytes.Compare(NetIPAddr(a), NetIPAddr(b))) != a.Compare(b) {
			t.Fatalf("NetIPAddr order of %v, %v", a, b)
		}
		bitsA, bitsB := int(len(za))%(a.BitLen()+1), int(len(zb))%(b.BitLen()+1)
		pa, pb := netip.PrefixFrom(a.WithZone(""), bitsA), netip.PrefixFrom(b.WithZone(""), bitsB)
		if sign(bytes.Compare(NetIPPrefix(pa), NetIPPrefix(pb))) != comparePrefix(pa, pb) {
			t.Fatalf("NetIPPrefix order of %v, %v", pa, pb)
		}
		// Distinct values never share a key.
		if a != b && bytes.Equal(NetIPAddr(a), NetIPAddr(b)) {
			t.Fatalf("%v and %v share a key", a, b)
		}
	})
}

// AppendNetIPPrefix appends what NetIPPrefix returns, and allocates
// nothing when the key has room.
func TestAppendNetIPPrefix(t *testing.T) {
	head := Key{1, 2, 3}
	for _, s := range []string{"10.0.0.0/8", "0.0.0.0/0", "192.0.2.1/32", "2001:db8::/32", "::/0", "fe80::1/128"} {
		p := netip.MustParsePrefix(s)
		want := append(slices.Clone(head), NetIPPrefix(p)...)
		if got := AppendNetIPPrefix(slices.Clone(head), p); !bytes.Equal(got, want) {
			t.Errorf("%s: %x, want %x", s, got, want)
		}
		buf := make(Key, 0, 64)
		if n := testing.AllocsPerRun(10, func() { buf = AppendNetIPPrefix(buf[:0], p) }); n != 0 {
			t.Errorf("%s: %v allocations into a key with room", s, n)
		}
	}
	if got := AppendNetIPPrefix(slices.Clone(head), netip.Prefix{}); !bytes.Equal(got, append(slices.Clone(head), NetIPPrefix(netip.Prefix{})...)) {
		t.Errorf("invalid prefix: %x", got)
	}
}

func TestSortedKeysSortValues(t *testing.T) {
	vals := []int64{5, -3, 0, 1 << 50, -1 << 50, 7}
	keys := make([]Key, len(vals))
	for i, v := range vals {
		keys[i] = Int64(v)
	}
	slices.SortFunc(keys, func(a, b Key) int { return bytes.Compare(a, b) })
	slices.Sort(vals)
	for i := range vals {
		if !bytes.Equal(keys[i], Int64(vals[i])) {
			t.Fatalf("position %d: sorted keys and sorted values differ", i)
		}
	}
}

// TestStringShares: String shares the string's bytes (no allocation) and
// reads them right, also for the empty string.
func TestStringShares(t *testing.T) {
	s := strings.Repeat("ab", 20)
	if n := testing.AllocsPerRun(100, func() { _ = String(s) }); n != 0 {
		t.Errorf("String allocates %v times", n)
	}
	if k := String(s); string(k) != s || len(k) != len(s) {
		t.Errorf("String(%q) = %q", s, k)
	}
	if k := String(""); k == nil || len(k) != 0 {
		t.Errorf("String(\"\") = %#v, want an empty non-nil key", k)
	}
}
