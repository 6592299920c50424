package statedb

import (
	"context"
	"strings"
	"testing"

	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
)

func TestTableCell(t *testing.T) {
	var (
		rw      RWTable[*testObject]
		ro      Table[*testObject]
		db      *DB
		outside bool
	)
	h := hive.New(
		Cell,
		cell.Module("objects", "Owner of the objects table",
			TableCell("objs", idIndex, tagIndex),
			cell.Invoke(func(d *DB, t RWTable[*testObject]) { db, rw = d, t }),
		),
		cell.Module("reader", "Reads the objects table",
			cell.Invoke(func(t Table[*testObject]) { ro = t }),
		),
	)
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer h.Stop(context.Background())

	wtxn := db.WriteTxn(rw)
	rw.Insert(wtxn, &testObject{ID: 1})
	wtxn.Commit()
	if ro.NumObjects(db.ReadTxn()) != 1 {
		t.Fatal("read-only table does not see the insert")
	}
	if _, ok := ro.(RWTable[*testObject]); ok {
		t.Fatal("the read-only Table can be asserted back to RWTable")
	}
	// The metrics reach the hive's registry.
	mfs, err := h.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "steadystate_statedb_table_objects" {
			outside = true
		}
	}
	if !outside {
		t.Fatal("statedb metrics not in the hive's registry")
	}

	// Outside its module the writable table is not available.
	h2 := hive.New(
		Cell,
		cell.Module("objects", "Owner", TableCell("objs", idIndex)),
		cell.Module("writer", "Would-be writer", cell.Invoke(func(RWTable[*testObject]) {})),
	)
	err = h2.Populate()
	if err == nil || !strings.Contains(err.Error(), "RWTable") {
		t.Fatalf("RWTable outside its module: %v", err)
	}
}

func TestDeriveCell(t *testing.T) {
	var (
		db  *DB
		in  RWTable[*testObject]
		out Table[*derived]
	)
	h := hive.New(
		Cell,
		cell.Module("source", "Source", TableCell("in", idIndex),
			cell.Invoke(func(d *DB, t RWTable[*testObject]) { db, in = d, t })),
		cell.Module("copy", "Derived copy",
			TableCell("out", derivedID),
			DeriveCell(func(o *testObject, deleted bool) (*derived, DeriveResult) {
				if deleted {
					return &derived{ID: o.ID}, DeriveDelete
				}
				return &derived{ID: o.ID, Length: len(o.Name)}, DeriveInsert
			}),
			cell.Invoke(func(t Table[*derived]) { out = t })),
	)
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	wtxn := db.WriteTxn(in)
	in.Insert(wtxn, &testObject{ID: 7, Name: "seven"})
	wtxn.Commit()
	waitFor(t, "derived object", func() bool {
		o, _, found := out.Get(db.ReadTxn(), derivedID.Query(7))
		return found && o.Length == 5
	})
	if err := h.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}
