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
	Unique:     true,
}

// StatusIndex is an optional secondary index by reconciliation status,
// so that "every sysctl in Error" is a query. It is not in NewTable by
// default: every status write then also updates it, which costs about a
// sixth of the reconciler's time per object in the bulk benchmark.
var StatusIndex = reconciler.StatusIndex((*Sysctl).GetStatus)

// NewTable creates the sysctls table in db with NameIndex as the primary index
// and the given secondary indexes (such as StatusIndex). Errors are those
// of statedb.NewTable.
func NewTable(db *statedb.DB, secondary ...statedb.Indexer[*Sysctl]) (statedb.RWTable[*Sysctl], error) {
	return statedb.NewTable(db, TableName, NameIndex, secondary...)
}

// ReconcilerConfig returns the reconciler configuration for table and
// target, named "sysctl", with the other fields at their defaults.
func ReconcilerConfig(table statedb.RWTable[*Sysctl], target *Target) reconciler.Config[*Sysctl] {
	return reconciler.Config[*Sysctl]{
		Name:            "sysctl",
		Table:           table,
		Target:          target,
		GetObjectStatus: (*Sysctl).GetStatus,
		SetObjectStatus: (*Sysctl).SetStatus,
		CloneObject:     (*Sysctl).Clone,
	}
}
