package statedbcell

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/statedb"
)

type object struct {
	ID   uint64
	Name string
}

var idIndex = statedb.Index[*object, uint64]{
	Name:       "id",
	FromObject: func(o *object) index.KeySet { return index.NewKeySet(index.Uint64(o.ID)) },
	FromKey:    index.Uint64,
	Unique:     true,
}

var nameIndex = statedb.Index[*object, string]{
	Name:       "name",
	FromObject: func(o *object) index.KeySet { return index.NewKeySet(index.String(o.Name)) },
	FromKey:    index.String,
}

// length is what the derived table holds: the length of each object's name.
type length struct {
	ID     uint64
	Length int
}

var lengthID = statedb.Index[*length, uint64]{
	Name:       "id",
	FromObject: func(l *length) index.KeySet { return index.NewKeySet(index.Uint64(l.ID)) },
	FromKey:    index.Uint64,
	Unique:     true,
}

// waitFor polls cond until it holds or 10 seconds have passed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TableCell provides the writable table inside its module only and the
// read-only view everywhere; Cell's DB reports to the hive's registry.
func TestTableCell(t *testing.T) {
	var (
		rw statedb.RWTable[*object]
		ro statedb.Table[*object]
		db *statedb.DB
	)
	h := hive.New(
		Cell,
		cell.Module("objects", "Owner of the objects table",
			TableCell("objs", idIndex, nameIndex),
			cell.Invoke(func(d *statedb.DB, t statedb.RWTable[*object]) { db, rw = d, t }),
		),
		cell.Module("reader", "Reads the objects table",
			cell.Invoke(func(t statedb.Table[*object]) { ro = t }),
		),
	)
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer h.Stop(context.Background())

	wtxn := db.WriteTxn(rw)
	rw.Insert(wtxn, &object{ID: 1})
	wtxn.Commit()
	if ro.NumObjects(db.ReadTxn()) != 1 {
		t.Fatal("the read-only table does not see the insert")
	}
	if _, ok := ro.(statedb.RWTable[*object]); ok {
		t.Fatal("the read-only Table can be asserted back to RWTable")
	}
	if got := gather(t, h.Registry())[`steadystate_statedb_table_objects{table="objs"}`]; got != 1 {
		t.Fatalf("steadystate_statedb_table_objects{table=objs} = %v in the hive's registry, want 1", got)
	}

	// Outside its module the writable table is not available.
	h2 := hive.New(
		Cell,
		cell.Module("objects", "Owner", TableCell("objs", idIndex)),
		cell.Module("writer", "Would-be writer", cell.Invoke(func(statedb.RWTable[*object]) {})),
	)
	if err := h2.Populate(); err == nil || !strings.Contains(err.Error(), "RWTable") {
		t.Fatalf("RWTable outside its module: %v", err)
	}

	// NewTable's errors fail the construction of the hive.
	h3 := hive.New(Cell, cell.Module("objects", "Owner", TableCell("Bad Name", idIndex),
		cell.Invoke(func(statedb.Table[*object]) {})))
	if err := h3.Populate(); err == nil || !strings.Contains(err.Error(), "Bad Name") {
		t.Fatalf("TableCell with an invalid name: %v", err)
	}
}

// DeriveCell runs a Deriver as a job of its module, which stops with the
// hive.
func TestDeriveCell(t *testing.T) {
	var (
		db  *statedb.DB
		in  statedb.RWTable[*object]
		out statedb.Table[*length]
	)
	h := hive.New(
		Cell,
		cell.Module("source", "Source", TableCell("in", idIndex),
			cell.Invoke(func(d *statedb.DB, t statedb.RWTable[*object]) { db, in = d, t })),
		cell.Module("lengths", "Derived lengths",
			TableCell("out", lengthID),
			DeriveCell(func(o *object, deleted bool) (*length, statedb.DeriveResult) {
				if deleted {
					return &length{ID: o.ID}, statedb.DeriveDelete
				}
				return &length{ID: o.ID, Length: len(o.Name)}, statedb.DeriveInsert
			}),
			cell.Invoke(func(t statedb.Table[*length]) { out = t })),
	)
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	wtxn := db.WriteTxn(in)
	in.Insert(wtxn, &object{ID: 7, Name: "seven"})
	wtxn.Commit()
	waitFor(t, "the derived object", func() bool {
		o, _, found := out.Get(db.ReadTxn(), lengthID.Query(7))
		return found && o.Length == 5
	})
	if err := h.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The stopped Deriver no longer keeps deletes of in.
	if info := db.TableInfos(db.ReadTxn())[0]; info.Name != "in" || info.ChangeIterators != 0 {
		t.Fatalf("after Stop: %+v, want no change iterator on in", info)
	}
}
