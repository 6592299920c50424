package routes

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// TableName is the name of the statedb table of desired routes.
const TableName = "routes"

// PrimaryIndex is the routes table's primary index, unique on the route's
// identity (Route.Key): inserting a Route with the key of a stored one
// replaces it, as `ip route replace` would. Its text keys are
// TABLE/PREFIX/METRIC (see ParseRouteKey); a prefix query also takes the
// beginning of one, TABLE/ or TABLE/PREFIX/ (see ParseRouteKeyPrefix), so
// that `db prefix routes key 254/` lists the routes of table 254.
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
	PrefixFromString: ParseRouteKeyPrefix,
	KeyFormat:        "TABLE/PREFIX/METRIC (a prefix query takes TABLE/ or TABLE/PREFIX/ too)",
	KeyExample:       "254/192.0.2.0/24/0",
	Unique:           true,
}

// ParseRouteKeyPrefix parses the beginning of a route key as text, for
// prefix queries, and returns its encoding, a prefix of the encoded keys
// it covers: "" (every route), TABLE or TABLE/ (the routes of a routing
// table), TABLE/PREFIX or TABLE/PREFIX/ (the routes of that prefix in that
// table, whatever their metric), or a whole key (see ParseRouteKey). Table
// 0 is main, as in a key. The encoding does not keep the text's digits, so
// a part of a number (25 for 254) is no prefix: it is read whole.
func ParseRouteKeyPrefix(s string) (index.Key, error) {
	if s == "" {
		return index.Key{}, nil
	}
	parts := strings.Split(strings.TrimSuffix(s, "/"), "/")
	switch len(parts) {
	case 1, 3:
	case 4:
		k, err := ParseRouteKey(s)
		if err != nil {
			return nil, err
		}
		return k.Encode(), nil
	default:
		return nil, fmt.Errorf("route key prefix %q: want TABLE/, TABLE/PREFIX/ or TABLE/PREFIX/METRIC, such as 254/ or 254/10.0.0.0/8/", s)
	}
	table, err := strconv.ParseUint(parts[0], 10, 32)
	if err != nil {
		return nil, fmt.Errorf("route key prefix %q: table: %w", s, errors.Unwrap(err))
	}
	if table == 0 {
		table = MainTable
	}
	key := index.Uint32(uint32(table))
	if len(parts) == 1 {
		return key, nil
	}
	p, err := netip.ParsePrefix(parts[1] + "/" + parts[2])
	if err != nil {
		return nil, fmt.Errorf("route key prefix %q: %w", s, err)
	}
	if p.Masked() != p {
		return nil, fmt.Errorf("route key prefix %q: prefix %s has host bits set (did you mean %s?)", s, p, p.Masked())
	}
	return index.AppendNetIPPrefix(key, p), nil
}

// StatusIndex is the secondary index by reconciliation status, so that
// "every route in Error" is a query and counting objects by status
// (reconciler.CountByStatus) needs no pass over the table. Each status
// write also updates it.
var StatusIndex = reconciler.StatusIndex((*Route).GetStatus)

// CoveringIndex is a longest-prefix-match index on the routes' prefixes,
// over every routing table: Lookup answers "which desired route covers
// this address" per routing table with it, and `agent db lpm routes
// covering ADDRESS` across tables. Routes may overlap (10.0.0.0/8 beside
// 10.1.0.0/16, or one prefix in two routing tables); only routes with the
// same key (prefix, table, metric) conflict, which the primary index
// refuses.
var CoveringIndex = statedb.LPMIndex[*Route]{
	Name:   "covering",
	Prefix: func(r *Route) netip.Prefix { return r.Prefix },
}

// Lookup returns the desired route of routing table rtTable (0: main) that
// covers addr with the longest prefix (the lowest metric among routes of
// that prefix), as the kernel would choose among the desired routes.
func Lookup(txn statedb.ReadTxn, routes statedb.Table[*Route], addr netip.Addr, rtTable int) (*Route, bool) {
	want := effectiveTable(rtTable)
	var best *Route
	for r := range routes.Matches(txn, CoveringIndex.Query(addr)) {
		if effectiveTable(r.Table) != want {
			continue
		}
		if best != nil && best.Prefix.Bits() > r.Prefix.Bits() {
			break // matches come longest first: no better one follows
		}
		if best == nil || effectiveMetric(r.Prefix, r.Metric) < effectiveMetric(best.Prefix, best.Metric) {
			best = r
		}
	}
	return best, best != nil
}

// NewTable creates the routes table in db with PrimaryIndex, StatusIndex
// and the further secondary indexes given. Errors are those of
// statedb.NewTable (for example a second table named TableName).
func NewTable(db *statedb.DB, secondary ...statedb.Indexer[*Route]) (statedb.RWTable[*Route], error) {
	return statedb.NewTable(db, TableName, PrimaryIndex, append([]statedb.Indexer[*Route]{StatusIndex, CoveringIndex}, secondary...)...)
}
