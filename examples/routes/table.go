package routes

import (
	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// TableName is the name of the statedb table of desired routes.
const TableName = "routes"

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

// StatusIndex is the secondary index by reconciliation status, so that
// "every route in Error" is a query and counting objects by status
// (reconciler.CountByStatus) needs no pass over the table. Each status
// write also updates it.
var StatusIndex = reconciler.StatusIndex((*Route).GetStatus)

// NewTable creates the routes table in db with PrimaryIndex, StatusIndex
// and the further secondary indexes given. Errors are those of
// statedb.NewTable (for example a second table named TableName).
func NewTable(db *statedb.DB, secondary ...statedb.Indexer[*Route]) (statedb.RWTable[*Route], error) {
	return statedb.NewTable(db, TableName, PrimaryIndex, append([]statedb.Indexer[*Route]{StatusIndex}, secondary...)...)
}
