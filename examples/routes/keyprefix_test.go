package routes

import (
	"bytes"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/statedb"
)

func TestParseRouteKeyPrefix(t *testing.T) {
	p8 := index.NetIPPrefix(netip.MustParsePrefix("10.0.0.0/8"))
	cat := func(parts ...index.Key) (k index.Key) {
		for _, p := range parts {
			k = append(k, p...)
		}
		return k
	}
	tests := []struct {
		in   string
		want index.Key
		err  string
	}{
		{in: "", want: index.Key{}},
		{in: "254", want: index.Uint32(254)},
		{in: "254/", want: index.Uint32(254)},
		{in: "0/", want: index.Uint32(254)},
		{in: "100/10.0.0.0/8", want: cat(index.Uint32(100), p8)},
		{in: "100/10.0.0.0/8/", want: cat(index.Uint32(100), p8)},
		{in: "100/2001:db8::/32/", want: cat(index.Uint32(100), index.NetIPPrefix(netip.MustParsePrefix("2001:db8::/32")))},
		{in: "100/10.0.0.0/8/5", want: cat(index.Uint32(100), p8, index.Uint32(5))},
		{in: "x/", err: "table"},
		{in: "254/10.0.0.0", err: "want TABLE/, TABLE/PREFIX/ or TABLE/PREFIX/METRIC"},
		{in: "254/10.0.0.0/", err: "want TABLE/, TABLE/PREFIX/ or TABLE/PREFIX/METRIC"},
		{in: "254/10.1.0.0/8/", err: "host bits"},
		{in: "254/10.0.0.0/33/", err: "ParsePrefix"},
		{in: "254/10.0.0.0/8/x", err: "metric"},
		{in: "254/10.0.0.0/8/0/1", err: "want TABLE/"},
		{in: "/", err: "table"},
	}
	for _, tt := range tests {
		got, err := ParseRouteKeyPrefix(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseRouteKeyPrefix(%q) = %x, %v; want an error containing %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || !bytes.Equal(got, tt.want) {
			t.Errorf("ParseRouteKeyPrefix(%q) = %x, %v; want %x", tt.in, got, err, tt.want)
		}
	}
}

// A prefix query on the primary index lists the routes of a routing table
// (254/ with main's given as table 0 too) or of one prefix in it.
func TestPrefixQuery(t *testing.T) {
	db := statedb.New()
	tbl, err := NewTable(db)
	if err != nil {
		t.Fatal(err)
	}
	wtxn := db.WriteTxn(tbl)
	for _, r := range []*Route{
		{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Type: TypeBlackhole},
		{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Type: TypeBlackhole, Metric: 7},
		{Prefix: netip.MustParsePrefix("10.0.0.0/16"), Type: TypeBlackhole},
		{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Type: TypeBlackhole, Table: 100},
		{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Type: TypeBlackhole, Table: 2540},
	} {
		if _, _, err := tbl.Insert(wtxn, r); err != nil {
			t.Fatal(err)
		}
	}
	txn := wtxn.Commit()
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"254/", []string{"254/10.0.0.0/8/0", "254/10.0.0.0/8/7", "254/10.0.0.0/16/0"}},
		{"0", []string{"254/10.0.0.0/8/0", "254/10.0.0.0/8/7", "254/10.0.0.0/16/0"}},
		{"254/10.0.0.0/8/", []string{"254/10.0.0.0/8/0", "254/10.0.0.0/8/7"}},
		{"100/", []string{"100/10.0.0.0/8/0"}},
		{"25/", nil},
	} {
		q, err := PrimaryIndex.PrefixQueryString(tc.prefix)
		if err != nil {
			t.Fatalf("PrefixQueryString(%q): %v", tc.prefix, err)
		}
		var got []string
		for r := range tbl.Prefix(txn, q) {
			got = append(got, r.Key().String())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("prefix %q: %v, want %v", tc.prefix, got, tc.want)
		}
	}
}

// FuzzRouteKeyPrefix: whatever ParseRouteKeyPrefix accepts is a prefix of
// the encoding of exactly the keys whose text form starts with the
// prefix's text, read whole (table 0 as 254, a full key as itself).
func FuzzRouteKeyPrefix(f *testing.F) {
	for _, s := range []string{"", "254", "254/", "0/", "100/10.0.0.0/8/", "100/2001:db8::/32", "254/10.0.0.0/8/0", "x/", "1//", "254/10.1.0.0/8"} {
		f.Add(s, "254/10.0.0.0/8/0")
	}
	f.Fuzz(func(t *testing.T, prefix, key string) {
		p, err := ParseRouteKeyPrefix(prefix)
		if err != nil {
			return
		}
		k, err := ParseRouteKey(key)
		if err != nil {
			return
		}
		text, ok := prefixText(prefix)
		if !ok {
			t.Fatalf("ParseRouteKeyPrefix accepted %q, which is no prefix of a key's text", prefix)
		}
		inText := strings.HasPrefix(k.String()+"/", text)
		if inEncoding := bytes.HasPrefix(k.Encode(), p); inEncoding != inText {
			t.Fatalf("prefix %q (text %q) and key %v: encoded prefix %v, text prefix %v", prefix, text, k, inEncoding, inText)
		}
	})
}

// prefixText returns the canonical text of a key prefix, ending in "/":
// what the text of a key (with "/" added) starts with when the key is
// under the prefix.
func prefixText(s string) (string, bool) {
	if s == "" {
		return "", true
	}
	if k, err := ParseRouteKey(s); err == nil {
		return k.String() + "/", true
	}
	parts := strings.Split(strings.TrimSuffix(s, "/"), "/")
	table, err := strconv.ParseUint(parts[0], 10, 32)
	if err != nil || (len(parts) != 1 && len(parts) != 3) {
		return "", false
	}
	if table == 0 {
		table = MainTable
	}
	text := strconv.FormatUint(table, 10) + "/"
	if len(parts) == 3 {
		p, err := netip.ParsePrefix(parts[1] + "/" + parts[2])
		if err != nil || p.Masked() != p {
			return "", false
		}
		text += p.String() + "/"
	}
	return text, true
}
