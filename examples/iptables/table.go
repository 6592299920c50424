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
	Unique:     true,
}

// StatusIndex is an optional secondary index by reconciliation status,
// so that "every rule in Error" is a query. It is not in NewTable by
// default: every status write then also updates it, which costs about a
// sixth of the reconciler's time per object in the bulk benchmark.
var StatusIndex = reconciler.StatusIndex((*Rule).GetStatus)

// NewTable creates the rules table in db with KeyIndex as the primary index
// and the given secondary indexes (such as StatusIndex). Errors are those
// of statedb.NewTable.
func NewTable(db *statedb.DB, secondary ...statedb.Indexer[*Rule]) (statedb.RWTable[*Rule], error) {
	return statedb.NewTable(db, TableName, KeyIndex, secondary...)
}

// DefaultIncrementalRoundSize is the round size ReconcilerConfig sets:
// large, because a round is one iptables-restore whose cost is mostly per
// call, so a bulk load should take few rounds.
const DefaultIncrementalRoundSize = 10000

// ReconcilerConfig returns the reconciler configuration for table and
// target, named "iptables", with IncrementalRoundSize
// DefaultIncrementalRoundSize and the other fields at their defaults.
// table must be the table the target was made with.
func ReconcilerConfig(table statedb.RWTable[*Rule], target *Target) reconciler.Config[*Rule] {
	return reconciler.Config[*Rule]{
		Name:                 "iptables",
		Table:                table,
		Target:               target,
		GetObjectStatus:      (*Rule).GetStatus,
		SetObjectStatus:      (*Rule).SetStatus,
		CloneObject:          (*Rule).Clone,
		IncrementalRoundSize: DefaultIncrementalRoundSize,
	}
}
