package statedb

import (
	"errors"
	"strings"
	"testing"

	"github.com/steadystate/steadystate/index"
)

// Every error wraps its documented sentinel and names what it concerns:
// the table, and for queries given as text the index (see errors.go). The
// errors of NewTable and of writes have their own tests (TestNewTableErrors,
// the model test); these are the rest.
func TestErrorsWrapSentinels(t *testing.T) {
	db, tbl := newTestTable(t, "objs", tagIndex, nameIndex)
	noKey := Index[*testObject, uint64]{
		Name:       "id",
		FromObject: func(*testObject) index.KeySet { return index.NewKeySet() },
		FromKey:    index.Uint64,
		Unique:     true,
	}
	keyless, err := NewTable(db, "keyless", noKey)
	if err != nil {
		t.Fatal(err)
	}
	out, err := NewTable(db, "out", derivedID)
	if err != nil {
		t.Fatal(err)
	}
	withParser := nameIndex
	withParser.FromString = func(s string) (index.Key, error) { return nil, errors.New("no parse") }

	for _, tc := range []struct {
		what     string
		err      func() error
		sentinel error
		names    []string // what the message must name
	}{
		{"QueryString of a bad integer", func() error { _, err := idIndex.QueryString("one"); return err },
			ErrBadQuery, []string{`index "id"`, `"one"`}},
		{"QueryString through FromString", func() error { _, err := withParser.QueryString("x"); return err },
			ErrBadQuery, []string{`index "name"`, "no parse"}},
		{"query of a bad key", func() error {
			_, err := tbl.(anyTable).anyQuery(db.ReadTxn(), QueryGet, "id", "one")
			return err
		}, ErrBadQuery, []string{`table "objs"`, `index "id"`}},
		{"query of an unknown index", func() error {
			_, err := tbl.(anyTable).anyQuery(db.ReadTxn(), QueryGet, "color", "1")
			return err
		}, ErrBadQuery, []string{`table "objs"`, `"color"`}},
		{"query of a bad revision", func() error {
			_, err := tbl.(anyTable).anyQuery(db.ReadTxn(), QueryLowerBound, RevisionIndex, "x")
			return err
		}, ErrBadQuery, []string{`table "objs"`, RevisionIndex}},
		{"query with an unknown operation", func() error {
			_, err := tbl.(anyTable).anyQuery(db.ReadTxn(), "scan", "id", "1")
			return err
		}, ErrBadQuery, []string{`table "objs"`, `"scan"`}},
		{"Insert without a primary key", func() error {
			wtxn := db.WriteTxn(keyless)
			defer wtxn.Abort()
			_, _, err := keyless.Insert(wtxn, &testObject{ID: 1})
			return err
		}, ErrPrimaryKey, []string{`table "keyless"`, `index "id"`}},
		{"Changes through a closed WriteTxn", func() error {
			wtxn := db.WriteTxn(tbl)
			wtxn.Abort()
			_, err := tbl.Changes(wtxn)
			return err
		}, ErrTransactionClosed, []string{`table "objs"`}},
		{"Changes through a WriteTxn of another table", func() error {
			wtxn := db.WriteTxn(keyless)
			defer wtxn.Abort()
			_, err := tbl.Changes(wtxn)
			return err
		}, ErrTableNotLockedForWriting, []string{`table "objs"`}},
		{"DeleteAll through a closed WriteTxn", func() error {
			wtxn := db.WriteTxn(tbl)
			wtxn.Commit()
			return tbl.DeleteAll(wtxn)
		}, ErrTransactionClosed, []string{`table "objs"`}},
		{"NewDeriver without a transform", func() error {
			_, err := NewDeriver[*testObject, *derived](db, tbl.ToTable(), out, nil)
			return err
		}, ErrInvalidDeriver, []string{"objs -> out"}},
	} {
		t.Run(tc.what, func(t *testing.T) {
			err := tc.err()
			if !errors.Is(err, tc.sentinel) {
				t.Fatalf("error %v, want one wrapping %v", err, tc.sentinel)
			}
			for _, n := range tc.names {
				if !strings.Contains(err.Error(), n) {
					t.Errorf("error %q does not name %s", err, n)
				}
			}
		})
	}
}
