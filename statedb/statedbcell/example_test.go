package statedbcell_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/statedb"
	"github.com/steadystate/steadystate/statedb/statedbcell"
)

type Route struct {
	Prefix string
	Dev    string
}

var byPrefix = statedb.Index[*Route, string]{
	Name:       "prefix",
	FromObject: func(r *Route) index.KeySet { return index.NewKeySet(index.String(r.Prefix)) },
	FromKey:    index.String,
	Unique:     true,
}

// A table owned by one module: its writer gets the RWTable, every other
// module the read-only Table.
func ExampleTableCell() {
	var (
		db     *statedb.DB
		routes statedb.Table[*Route]
	)
	h := hive.NewWithOptions(hive.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		statedbcell.Cell,
		cell.Module("routes", "Desired routes",
			statedbcell.TableCell("routes", byPrefix),
			cell.Invoke(func(d *statedb.DB, t statedb.RWTable[*Route]) error {
				wtxn := d.WriteTxn(t)
				defer wtxn.Abort()
				if _, _, err := t.Insert(wtxn, &Route{Prefix: "10.0.0.0/8", Dev: "eth0"}); err != nil {
					return err
				}
				wtxn.Commit()
				return nil
			}),
		),
		cell.Module("api", "Reads the routes",
			cell.Invoke(func(d *statedb.DB, t statedb.Table[*Route]) { db, routes = d, t }),
		),
	)
	if err := h.Start(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	defer h.Stop(context.Background())
	for r := range routes.All(db.ReadTxn()) {
		fmt.Println(r.Prefix, r.Dev)
	}
	// Output:
	// 10.0.0.0/8 eth0
}
