package iptables

import (
	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// TableName is the name of the desired rules table.
const TableName = "iptables-rules"

// KeyIndex is the primary index, by Rule.Key ("table/chain/name"). Since
// the key starts with table and chain, a Prefix query for
// "filter/INPUT/" lists the rules of one chain in name order.
var KeyIndex = statedb.Index[*Rule, string]{
	Name:       "key",
	FromObject: func(r *Rule) index.KeySet { return index.NewKeySet(index.String(r.Key())) },
	FromKey:    index.String,
	KeyFormat:  "TABLE/CHAIN/NAME (a prefix query takes TABLE/CHAIN/ too)",
	KeyExample: "filter/INPUT/allow-ssh",
	Unique:     true,
}

// StatusIndex is the secondary index by reconciliation status, so that
// "every rule in Error" is a query and counting objects by status
// (reconciler.CountByStatus) needs no pass over the table. Each status
// write also updates it.
var StatusIndex = reconciler.StatusIndex((*Rule).GetStatus)

// NewTable creates the rules table in db with KeyIndex as the primary
// index, StatusIndex, and the further secondary indexes given. Errors are
// those of statedb.NewTable (for example a second table named TableName).
func NewTable(db *statedb.DB, secondary ...statedb.Indexer[*Rule]) (statedb.RWTable[*Rule], error) {
	return statedb.NewTable(db, TableName, KeyIndex, append([]statedb.Indexer[*Rule]{StatusIndex}, secondary...)...)
}
