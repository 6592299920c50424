package reconciler

import (
	"fmt"
	"slices"
	"strings"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/statedb"
)

// StatusIndex returns a non-unique index of objects by status kind, so that
// "all objects in Error" is a table query:
//
//	statusIdx := reconciler.StatusIndex(getStatus)
//	table, _ := statedb.NewTable(db, "routes", primary, statusIdx)
//	for obj := range table.List(txn, statusIdx.Query(reconciler.StatusKindError)) { ... }
//
// Its name is "status"; keys can be given as text ("Error", "done").
func StatusIndex[Obj any](getStatus func(Obj) Status) statedb.Index[Obj, StatusKind] {
	return statedb.Index[Obj, StatusKind]{
		Name: statusIndexName,
		FromObject: func(obj Obj) index.KeySet {
			return index.NewKeySet(statusKindKey(getStatus(obj).Kind))
		},
		FromKey: statusKindKey,
		FromString: func(s string) (index.Key, error) {
			k, err := ParseStatusKind(s)
			if err != nil {
				return nil, err
			}
			return statusKindKey(k), nil
		},
		KeyFormat:  "a status: Pending, Refreshing, Done or Error",
		KeyExample: "Error",
		Unique:     false,
	}
}

var statusKindKeys = func() (keys [len(statusKindNames)]index.Key) {
	for i := range keys {
		keys[i] = index.Key{byte(i)}
	}
	return
}()

// statusKindKey encodes a kind without allocating for the known kinds.
func statusKindKey(k StatusKind) index.Key {
	if int(k) < len(statusKindKeys) {
		return statusKindKeys[k]
	}
	return index.Key{byte(k)}
}

// ParseStatusKind parses a kind's name, ignoring case.
func ParseStatusKind(s string) (StatusKind, error) {
	for i, n := range statusKindNames {
		if i > 0 && strings.EqualFold(n, s) {
			return StatusKind(i), nil
		}
	}
	return 0, fmt.Errorf("unknown status kind %q (Pending, Refreshing, Done, Error)", s)
}

// MarshalText makes a kind appear by name in JSON and YAML.
func (k StatusKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText parses a kind's name; the empty string is Unset.
func (k *StatusKind) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*k = StatusKindUnset
		return nil
	}
	v, err := ParseStatusKind(string(b))
	*k = v
	return err
}

// statusIndexName is the name of StatusIndex's index.
const statusIndexName = "status"

// CountByStatus counts the objects of table in txn by the kind of their
// status (getStatus): for metrics, status pages and progress logs. The
// result has an entry, zero included, for each of kinds; without kinds, for
// each of Pending, Refreshing, Done and Error, and for Unset when an object
// has it.
//
// Given kinds, and a table with StatusIndex's index (named "status"; a
// table must not have another index of that name), it visits only the
// objects of those kinds, so that "how many are not Done yet" costs nothing
// once all are Done. Otherwise it makes one pass over the table.
func CountByStatus[Obj any](txn statedb.ReadTxn, table statedb.Table[Obj], getStatus func(Obj) Status, kinds ...StatusKind) map[StatusKind]int {
	counts := make(map[StatusKind]int, max(len(kinds), len(statusKindNames)-1))
	if len(kinds) > 0 && slices.Contains(table.Indexes(), statusIndexName) {
		byStatus := statedb.Index[Obj, StatusKind]{Name: statusIndexName, FromKey: statusKindKey}
		for _, k := range kinds {
			n := 0
			for range table.List(txn, byStatus.Query(k)) {
				n++
			}
			counts[k] = n
		}
		return counts
	}
	for _, k := range kinds {
		counts[k] = 0
	}
	if len(kinds) == 0 {
		for k := StatusKindPending; int(k) < len(statusKindNames); k++ {
			counts[k] = 0
		}
	}
	for obj := range table.All(txn) {
		k := getStatus(obj).Kind
		if _, ok := counts[k]; ok || len(kinds) == 0 {
			counts[k]++
		}
	}
	return counts
}
