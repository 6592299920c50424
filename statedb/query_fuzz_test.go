package statedb

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/steadystate/steadystate/index"
)

// FuzzQueryString: a key given as text (HTTP API, CLI) never panics; it
// parses exactly when the standard library's parser of the index's key type
// accepts it, and then encodes the same as the typed query of the parsed
// value; when it does not, the error wraps ErrBadQuery and names the index.
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
		// check compares QueryString's answer with the reference parser's:
		// want is the key of the parsed value, or refErr its failure.
		check := func(name string, q Query[*testObject], err error, want index.Key, refErr error) {
			t.Helper()
			switch {
			case refErr == nil && err != nil:
				t.Fatalf("index %s: %q: %v, but it parses", name, s, err)
			case refErr != nil && err == nil:
				t.Fatalf("index %s: %q parsed to %x, but the reference parser says %v", name, s, q.Key(), refErr)
			case err != nil && (!errors.Is(err, ErrBadQuery) || !strings.Contains(err.Error(), `index "`+name+`"`)):
				t.Fatalf("index %s: error %v does not wrap ErrBadQuery or does not name the index", name, err)
			case err == nil && (string(q.Key()) != string(want) || q.IndexName() != name):
				t.Fatalf("index %s: %q encodes as %x in index %q, want %x", name, s, q.Key(), q.IndexName(), want)
			}
		}
		q, err := u64.QueryString(s)
		n, refErr := strconv.ParseUint(s, 0, 64)
		check("u", q, err, index.Uint64(n), refErr)

		q, err = i64.QueryString(s)
		i, refErr := strconv.ParseInt(s, 0, 64)
		check("i", q, err, index.Int64(i), refErr)

		q, err = addr.QueryString(s)
		a, refErr := netip.ParseAddr(s)
		check("a", q, err, index.NetIPAddr(a), refErr)

		q, err = pfx.QueryString(s)
		p, refErr := netip.ParsePrefix(s)
		check("p", q, err, index.NetIPPrefix(p), refErr)

		q, err = boolean.QueryString(s)
		b, refErr := strconv.ParseBool(s)
		check("b", q, err, index.Bool(b), refErr)

		q, err = str.QueryString(s)
		check("s", q, err, index.String(s), nil)
	})
}
