package routes

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// RouteKey is a route's identity in the kernel: no two routes of one table
// share a prefix and a metric. (IPv4 also keys on TOS, which Route does not
// set: it is always 0.)
type RouteKey struct {
	// Table is the routing table; 254 is main.
	Table uint32
	// Prefix is the destination, masked.
	Prefix netip.Prefix
	// Metric is the metric as the kernel stores it (1024 for an IPv6 route
	// given 0).
	Metric uint32
}

// NewRouteKey returns the key of a route in table t (0 for main) to p with
// metric m (0 stands for 1024 with IPv6), read as Route.Key reads them.
func NewRouteKey(t uint32, p netip.Prefix, m uint32) RouteKey {
	if t == 0 {
		t = MainTable
	}
	if m == 0 && p.Addr().Is6() {
		m = DefaultIPv6Metric
	}
	return RouteKey{Table: t, Prefix: p, Metric: m}
}

// Encode returns k as an index key: the table (index.Uint32), the prefix
// (index.NetIPPrefix) and the metric (index.Uint32), concatenated. The
// prefix's first byte gives its family and thereby its length, so the parts
// never run into each other and byte order is the order of (table, family,
// address, prefix length, metric).
func (k RouteKey) Encode() index.Key {
	// One allocation: binary.BigEndian is index.Uint32's encoding (the
	// fuzz test holds the two to the same bytes).
	key := make(index.Key, 0, 4+1+16+1+4)
	key = binary.BigEndian.AppendUint32(key, k.Table)
	key = append(key, index.NetIPPrefix(k.Prefix)...)
	return binary.BigEndian.AppendUint32(key, k.Metric)
}

// String returns k in the text form that ParseRouteKey reads:
// TABLE/PREFIX/METRIC, such as "254/10.0.0.0/8/0" or
// "100/2001:db8::/32/1024".
func (k RouteKey) String() string {
	return strconv.FormatUint(uint64(k.Table), 10) + "/" + k.Prefix.String() + "/" + strconv.FormatUint(uint64(k.Metric), 10)
}

// ParseRouteKey parses TABLE/PREFIX/METRIC (see RouteKey.String), as given
// to the HTTP API and the CLI. Table and metric are decimal; table 0 and,
// for IPv6, metric 0 are read as NewRouteKey reads them. The prefix must be
// masked, as in a Route.
func ParseRouteKey(s string) (RouteKey, error) {
	first, last := strings.IndexByte(s, '/'), strings.LastIndexByte(s, '/')
	if first < 0 || last-first < 2 || strings.Count(s[first+1:last], "/") != 1 {
		return RouteKey{}, fmt.Errorf("route key %q: want TABLE/PREFIX/METRIC, such as 254/10.0.0.0/8/0", s)
	}
	table, err := strconv.ParseUint(s[:first], 10, 32)
	if err != nil {
		return RouteKey{}, fmt.Errorf("route key %q: table: %w", s, errors.Unwrap(err))
	}
	p, err := netip.ParsePrefix(s[first+1 : last])
	if err != nil {
		return RouteKey{}, fmt.Errorf("route key %q: %w", s, err)
	}
	if p.Masked() != p {
		return RouteKey{}, fmt.Errorf("route key %q: prefix %s has host bits set (did you mean %s?)", s, p, p.Masked())
	}
	metric, err := strconv.ParseUint(s[last+1:], 10, 32)
	if err != nil {
		return RouteKey{}, fmt.Errorf("route key %q: metric: %w", s, errors.Unwrap(err))
	}
	return NewRouteKey(uint32(table), p, uint32(metric)), nil
}

// PrimaryIndex is the routes table's primary index, unique on the route's
// identity (Route.Key): inserting a Route with the key of a stored one
// replaces it, as `ip route replace` would. Its text keys are
// TABLE/PREFIX/METRIC (see ParseRouteKey).
var PrimaryIndex = statedb.Index[*Route, RouteKey]{
	Name:       "key",
	FromObject: func(r *Route) index.KeySet { return index.NewKeySet(r.Key().Encode()) },
	FromKey:    RouteKey.Encode,
	FromString: func(s string) (index.Key, error) {
		k, err := ParseRouteKey(s)
		if err != nil {
			return nil, err
		}
		return k.Encode(), nil
	},
	Unique: true,
}

// StatusIndex finds routes by reconciliation status (see
// reconciler.StatusIndex).
var StatusIndex = reconciler.StatusIndex((*Route).GetStatus)

// NewTable creates the routes table in db with PrimaryIndex and
// StatusIndex. Its errors are those of statedb.NewTable (for example a
// second table named TableName).
func NewTable(db *statedb.DB) (statedb.RWTable[*Route], error) {
	return statedb.NewTable(db, TableName, PrimaryIndex, StatusIndex)
}
