package sysctl

import (
	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// TableName is the name of the desired sysctls table.
const TableName = "sysctls"

// NameIndex is the primary index: one object per sysctl name.
var NameIndex = statedb.Index[*Sysctl, string]{
	Name:       "name",
	FromObject: func(s *Sysctl) index.KeySet { return index.NewKeySet(index.String(s.Name)) },
	FromKey:    index.String,
	KeyFormat:  "a sysctl name",
	KeyExample: "net.ipv4.ip_forward",
	Unique:     true,
}

// StatusIndex is the secondary index by reconciliation status, so that
// "every sysctl in Error" is a query and counting objects by status
// (reconciler.CountByStatus) needs no pass over the table. Each status
// write also updates it.
var StatusIndex = reconciler.StatusIndex((*Sysctl).GetStatus)

// NewTable creates the sysctls table in db with NameIndex as the primary
// index, StatusIndex, and the further secondary indexes given. Errors are
// those of statedb.NewTable (for example a second table named TableName).
func NewTable(db *statedb.DB, secondary ...statedb.Indexer[*Sysctl]) (statedb.RWTable[*Sysctl], error) {
	return statedb.NewTable(db, TableName, NameIndex, append([]statedb.Indexer[*Sysctl]{StatusIndex}, secondary...)...)
}
