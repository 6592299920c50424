package statedb

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/steadystate/steadystate/index"
)

// FuzzQueryString: keys given as text (HTTP API, CLI) never panic, and a key
// that parses encodes the same as the typed query of the parsed value.
func FuzzQueryString(f *testing.F) {
	for _, s := range []string{"", "0", "-1", "0x10", "18446744073709551615", "true", "10.0.0.1", "10.0.0.0/8", "::1", "fe80::1%eth0", "abc"} {
		f.Add(s)
	}
	u64 := Index[*testObject, uint64]{Name: "u", FromObject: idIndex.FromObject, FromKey: index.Uint64}
	i64 := Index[*testObject, int64]{Name: "i", FromObject: idIndex.FromObject, FromKey: index.Int64}
	addr := Index[*testObject, netip.Addr]{Name: "a", FromObject: idIndex.FromObject, FromKey: index.NetIPAddr}
	pfx := Index[*testObject, netip.Prefix]{Name: "p", FromObject: idIndex.FromObject, FromKey: index.NetIPPrefix}
	boolean := Index[*testObject, bool]{Name: "b", FromObject: idIndex.FromObject, FromKey: index.Bool}
	str := Index[*testObject, string]{Name: "s", FromObject: idIndex.FromObject, FromKey: index.String}
	f.Fuzz(func(t *testing.T, s string) {
		check := func(q Query[*testObject], err error, name string) {
			if err != nil && !strings.Contains(err.Error(), `index "`+name+`"`) {
				t.Fatalf("error does not name the index: %v", err)
			}
		}
		q, err := u64.QueryString(s)
		check(q, err, "u")
		q, err = i64.QueryString(s)
		check(q, err, "i")
		q, err = addr.QueryString(s)
		check(q, err, "a")
		if err == nil {
			if a, perr := netip.ParseAddr(s); perr != nil || string(q.Key()) != string(index.NetIPAddr(a)) {
				t.Fatalf("addr %q: key %x", s, q.Key())
			}
		}
		q, err = pfx.QueryString(s)
		check(q, err, "p")
		q, err = boolean.QueryString(s)
		check(q, err, "b")
		q, err = str.QueryString(s)
		if err != nil || string(q.Key()) != s {
			t.Fatalf("string key %q: %x, %v", s, q.Key(), err)
		}
	})
}
