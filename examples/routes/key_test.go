package routes

import (
	"bytes"
	"cmp"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/statedb"
)

func TestParseRouteKey(t *testing.T) {
	tests := []struct {
		in   string
		want RouteKey
		err  string
	}{
		{in: "254/10.0.0.0/8/0", want: RouteKey{254, netip.MustParsePrefix("10.0.0.0/8"), 0}},
		{in: "0/10.0.0.0/8/5", want: RouteKey{254, netip.MustParsePrefix("10.0.0.0/8"), 5}},
		{in: "100/2001:db8::/32/1024", want: RouteKey{100, netip.MustParsePrefix("2001:db8::/32"), 1024}},
		{in: "7/2001:db8::/32/0", want: RouteKey{7, netip.MustParsePrefix("2001:db8::/32"), 1024}},
		{in: "4294967295/0.0.0.0/0/4294967295", want: RouteKey{1<<32 - 1, netip.MustParsePrefix("0.0.0.0/0"), 1<<32 - 1}},
		{in: "10.0.0.0/8", err: "want TABLE/PREFIX/METRIC"},
		{in: "254/10.0.0.0/0", err: "want TABLE/PREFIX/METRIC"},
		{in: "254//8/0", err: "ParsePrefix"},
		{in: "x/10.0.0.0/8/0", err: "table"},
		{in: "-1/10.0.0.0/8/0", err: "table"},
		{in: "4294967296/10.0.0.0/8/0", err: "table"},
		{in: "254/10.0.0.0/8/x", err: "metric"},
		{in: "254/10.1.0.0/8/0", err: "host bits"},
		{in: "254/10.0.0.0/8/0/1", err: "want TABLE/PREFIX/METRIC"},
	}
	for _, tt := range tests {
		got, err := ParseRouteKey(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseRouteKey(%q) = %v, %v; want an error containing %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseRouteKey(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

// TestKeyOrder checks that encoded keys sort like (table, family, address,
// length, metric).
func TestKeyOrder(t *testing.T) {
	var keys []RouteKey
	for _, table := range []uint32{1, 254, 256, 1 << 31} {
		for _, p := range []string{"0.0.0.0/0", "10.0.0.0/8", "10.0.0.0/16", "10.1.0.0/16", "255.255.255.255/32", "::/0", "2001:db8::/32", "2001:db8::/48", "ffff::/16"} {
			for _, m := range []uint32{0, 1, 256, 1 << 31} {
				keys = append(keys, RouteKey{table, netip.MustParsePrefix(p), m})
			}
		}
	}
	byKey := slices.Clone(keys)
	slices.SortFunc(byKey, func(a, b RouteKey) int { return bytes.Compare(a.Encode(), b.Encode()) })
	byValue := slices.Clone(keys)
	slices.SortFunc(byValue, func(a, b RouteKey) int {
		return cmp.Or(cmp.Compare(a.Table, b.Table), a.Prefix.Addr().Compare(b.Prefix.Addr()),
			cmp.Compare(a.Prefix.Bits(), b.Prefix.Bits()), cmp.Compare(a.Metric, b.Metric))
	})
	if !slices.Equal(byKey, byValue) {
		t.Fatalf("encoded order differs from value order:\n%v\n%v", byKey, byValue)
	}
}

// TestIndexes checks the primary index through a real table: one object
// per kernel identity, and lookups by text key.
func TestIndexes(t *testing.T) {
	db := statedb.New()
	tbl, err := NewTable(db)
	if err != nil {
		t.Fatal(err)
	}
	wtxn := db.WriteTxn(tbl)
	v6 := netip.MustParsePrefix("2001:db8::/32")
	for _, r := range []*Route{
		{Prefix: v6, Type: TypeBlackhole},                             // main, metric 1024
		{Prefix: v6, Type: TypeUnreachable, Table: 254, Metric: 1024}, // the same route
		{Prefix: v6, Type: TypeBlackhole, Table: 100},
	} {
		if _, _, err := tbl.Insert(wtxn, r); err != nil {
			t.Fatal(err)
		}
	}
	txn := wtxn.Commit()
	if n := tbl.NumObjects(txn); n != 2 {
		t.Fatalf("%d objects, want 2: two spellings of one kernel route are one object", n)
	}
	q, err := PrimaryIndex.QueryString("254/2001:db8::/32/0")
	if err != nil {
		t.Fatal(err)
	}
	if r, _, ok := tbl.Get(txn, q); !ok || r.Type != TypeUnreachable {
		t.Fatalf("Get(254/2001:db8::/32/0) = %v, %v; want the unreachable route", r, ok)
	}
	if _, err := PrimaryIndex.QueryString("254/2001:db8::1/32/0"); err == nil {
		t.Fatal("QueryString accepted a prefix with host bits")
	}
}

// FuzzRouteKey checks the text form and the encoding: whatever
// ParseRouteKey accepts prints back to a string that parses to the same
// key, and distinct keys never encode alike.
func FuzzRouteKey(f *testing.F) {
	for _, s := range []string{"254/10.0.0.0/8/0", "0/2001:db8::/32/0", "1/0.0.0.0/0/1", "4294967295/::/0/4294967295", "1//0", "a/b/c/d"} {
		f.Add(s, "100/10.0.0.0/16/7")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ka, errA := ParseRouteKey(a)
		kb, errB := ParseRouteKey(b)
		for _, k := range []struct {
			key RouteKey
			err error
		}{{ka, errA}, {kb, errB}} {
			if k.err != nil {
				continue
			}
			back, err := ParseRouteKey(k.key.String())
			if err != nil || back != k.key {
				t.Fatalf("%v printed as %q parsed back as %v, %v", k.key, k.key.String(), back, err)
			}
		}
		for _, k := range []RouteKey{ka, kb, {Table: ka.Table, Metric: kb.Metric}} {
			// The text as it was first written, by concatenation.
			text := strconv.FormatUint(uint64(k.Table), 10) + "/" + k.Prefix.String() + "/" + strconv.FormatUint(uint64(k.Metric), 10)
			if got := k.String(); got != text {
				t.Fatalf("%#v printed as %q, want %q", k, got, text)
			}
			var want index.Key
			want = append(want, index.Uint32(k.Table)...)
			want = append(want, index.NetIPPrefix(k.Prefix)...)
			want = append(want, index.Uint32(k.Metric)...)
			if !bytes.Equal(k.Encode(), want) {
				t.Fatalf("Encode(%v) = %x, want the index helpers' %x", k, k.Encode(), want)
			}
		}
		if errA == nil && errB == nil {
			same := bytes.Equal(ka.Encode(), kb.Encode())
			if same != (ka == kb) {
				t.Fatalf("keys %v and %v: equal=%v but encodings equal=%v", ka, kb, ka == kb, same)
			}
			order := bytes.Compare(ka.Encode(), kb.Encode())
			want := cmp.Or(cmp.Compare(ka.Table, kb.Table), ka.Prefix.Addr().Compare(kb.Prefix.Addr()),
				cmp.Compare(ka.Prefix.Bits(), kb.Prefix.Bits()), cmp.Compare(ka.Metric, kb.Metric))
			if order != want {
				t.Fatalf("keys %v and %v compare %d encoded, %d as values", ka, kb, order, want)
			}
		}
	})
}
