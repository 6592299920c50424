package fleetcell

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/steadystate/steadystate/etcd"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reflector"
	"github.com/steadystate/steadystate/statedb"
)

// Table is one of the program's tables that fleet mode fills: a Kind.
type Table interface {
	tableName() string
	spec() reflector.TableSpec[[]byte]
	report() reportedTable
}

// Kind says how fleet mode fills one of the program's tables and reports
// its objects. Every field is required.
type Kind[Obj any] struct {
	// Table is filled from etcd, under its own name.
	Table statedb.RWTable[Obj]
	// Reconciler is the table's: the status waits for it.
	Reconciler reconciler.Reconciler[Obj]
	// Equal, SetStatus and GetStatus are the objects' (see
	// reconciler.DesiredWriter and reconciler.Config).
	Equal     func(a, b Obj) bool
	SetStatus func(Obj, reconciler.Status) Obj
	GetStatus func(Obj) reconciler.Status
	// Decode turns an object's value in etcd, stored under name, into a
	// new object, validated as the program validates its desired state;
	// an error rejects it (the table keeps the last good version, and the
	// node reports it). It should check that name is the object's Name.
	Decode func(name string, v []byte) (Obj, error)
	// Name is the object's name in etcd: ObjectName of its primary key's
	// text, say.
	Name func(Obj) string
}

// ObjectName is the name in etcd of an object whose key reads key: a name
// may not hold '/', which keys often have, so it is path-escaped
// (url.PathEscape's text, made in one allocation, none when nothing is
// escaped: a file of 60,000 objects names each).
func ObjectName(key string) string {
	n := 0
	for i := 0; i < len(key); i++ {
		if !inName(key[i]) {
			n++
		}
	}
	if n == 0 {
		return key
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder // one allocation: a start names 60,000 objects
	b.Grow(len(key) + 2*n)
	for i := 0; i < len(key); i++ {
		if c := key[i]; inName(c) {
			b.WriteByte(c)
		} else {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

// inName tells the bytes that url.PathEscape leaves as they are: the
// unreserved ones and those a path segment may hold.
func inName(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '-', '_', '.', '~', '$', '&', '+', ':', '=', '@':
		return true
	}
	return false
}

// keyOf is the text of an object's key from its name, for messages.
func keyOf(name string) string {
	if key, err := url.PathUnescape(name); err == nil {
		return key
	}
	return name
}

// TableOut provides a Table to Cell, from a constructor of the program's:
//
//	cell.Provide(func(t statedb.RWTable[*Thing], r reconciler.Reconciler[*Thing]) fleetcell.TableOut {
//		return fleetcell.Out(fleetcell.Kind[*Thing]{...})
//	})
type TableOut struct {
	cell.Out
	Table Table `group:"fleet-tables"`
}

// Out wraps a Kind for Provide.
func Out[Obj any](k Kind[Obj]) TableOut { return TableOut{Table: k} }

// check tells which fields of the kind are missing.
func (k Kind[Obj]) check() error {
	if k.Table == nil || k.Reconciler == nil || k.Equal == nil || k.SetStatus == nil || k.GetStatus == nil || k.Decode == nil || k.Name == nil {
		name := "?"
		if k.Table != nil {
			name = k.Table.Name()
		}
		return fmt.Errorf("fleetcell.Kind of table %s: Table, Reconciler, Equal, SetStatus, GetStatus, Decode and Name are required", name)
	}
	return nil
}

func (k Kind[Obj]) tableName() string { return k.Table.Name() }

func (k Kind[Obj]) spec() reflector.TableSpec[[]byte] {
	return reflector.Into[[]byte, Obj]{
		Table:     k.Table.Name(),
		Writer:    reconciler.DesiredWriter[Obj]{Table: k.Table, Equal: k.Equal, SetObjectStatus: k.SetStatus},
		Transform: k.Decode,
	}
}

// maxReportedErrors is how many failing objects a node's status names.
const maxReportedErrors = 5

func (k Kind[Obj]) report() reportedTable {
	t, getStatus := k.Table, k.GetStatus
	return reportedTable{
		name: t.Name(),
		objects: func(txn statedb.ReadTxn) map[string]etcd.ObjectStatus {
			out := map[string]etcd.ObjectStatus{}
			for obj := range t.All(txn) {
				s := getStatus(obj)
				out[k.Name(obj)] = etcd.ObjectStatus{Kind: s.Kind.String(), Error: s.Error}
			}
			return out
		},
		revision: func(txn statedb.ReadTxn) (statedb.Revision, <-chan struct{}) {
			_, watch := t.AllWatch(txn)
			return t.Revision(txn), watch
		},
		wait: func(ctx context.Context, rev statedb.Revision) (int, error) {
			// Failing objects were attempted too: their errors are
			// reported. How many failed (failed deletes included) is
			// the reconciler's word.
			_, err := k.Reconciler.WaitUntilReconciled(ctx, rev)
			var nr *reconciler.NotReconciledError
			if errors.As(err, &nr) {
				return nr.Failing, ctx.Err()
			}
			return 0, ctx.Err()
		},
		count: func(txn statedb.ReadTxn, st *etcd.NodeStatus) (inError int) {
			for kind, n := range reconciler.CountByStatus(txn, t, getStatus) {
				st.Objects[kind.String()] += n
				if kind == reconciler.StatusKindError {
					inError = n
				}
			}
			for obj := range t.All(txn) {
				if s := getStatus(obj); s.Kind == reconciler.StatusKindError && len(st.Errors) < maxReportedErrors {
					st.Errors = append(st.Errors, fmt.Sprintf("%s %s: %s", t.Name(), keyOf(k.Name(obj)), s.Error))
				}
			}
			return inError
		},
	}
}

// reportedTable is what the reporter reads of one table.
type reportedTable struct {
	name     string
	revision func(statedb.ReadTxn) (statedb.Revision, <-chan struct{})
	// wait waits for the reconciler to attempt everything up to rev and
	// returns how many objects failed (deletes included).
	wait func(ctx context.Context, rev statedb.Revision) (failing int, err error)
	// count adds the table's objects by status (and errors) to st and
	// returns how many are in Error.
	count   func(txn statedb.ReadTxn, st *etcd.NodeStatus) (inError int)
	objects func(txn statedb.ReadTxn) map[string]etcd.ObjectStatus
}

var errNoTables = errors.New("fleet mode: no table was provided (fleetcell.TableOut)")
