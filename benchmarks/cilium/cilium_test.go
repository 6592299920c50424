package cilium

import (
	"context"
	"log/slog"
	"testing"

	chive "github.com/cilium/hive"
	ccell "github.com/cilium/hive/cell"
	cjob "github.com/cilium/hive/job"
	cstatedb "github.com/cilium/statedb"
	cindex "github.com/cilium/statedb/index"
)

// The cilium side: cilium/statedb (the version in go.mod, v0.9.4) at its
// best, as its users run it. A database outside a hive is started (its
// graveyard worker frees deleted objects) and stopped when the benchmark
// ends; a hive has cilium's statedb, job and health cells. Both use
// cilium's default metrics, which since v0.9 are its NopMetrics (as
// steadystate's default is no metrics), and ask for a watch channel only
// where the benchmark waits on one: since v0.9 cilium makes a channel only
// for the ...Watch reads (GetWatch, ListWatch, AllWatch, ...), as
// steadystate does. cilium's packages are imported with a c prefix:
// cstatedb, cindex, chive, ccell, cjob.

// ciID is cilium's primary index of object.
var ciID = cstatedb.Index[*object, uint64]{
	Name:       "id",
	FromObject: func(o *object) cindex.KeySet { return cindex.NewKeySet(cindex.Uint64(o.ID)) },
	FromKey:    cindex.Uint64,
	Unique:     true,
}

// ciDB is a cilium database with tables of object.
type ciDB struct {
	db     *cstatedb.DB
	tables []cstatedb.RWTable[*object]
}

// newCiDB returns a started database with one table per name; it is
// stopped when tb ends.
func newCiDB(tb testing.TB, names ...string) *ciDB {
	return newCiDBWith(tb, nil, names...)
}

// newCiDBWith is newCiDB with options for cilium's statedb.New.
func newCiDBWith(tb testing.TB, opts []cstatedb.Option, names ...string) *ciDB {
	c := &ciDB{db: cstatedb.New(opts...)}
	for _, name := range names {
		tbl, err := cstatedb.NewTable(c.db, name, ciID)
		if err != nil {
			tb.Fatal(err)
		}
		c.tables = append(c.tables, tbl)
	}
	if err := c.db.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := c.db.Stop(); err != nil {
			tb.Error(err)
		}
	})
	return c
}

// fill inserts an object for each id into table t and commits.
func (c *ciDB) fill(t int, ids []uint64) {
	tbl := c.tables[t]
	wtxn := c.db.WriteTxn(tbl)
	for _, id := range ids {
		_, _, err := tbl.Insert(wtxn, &object{ID: id})
		must(err)
	}
	wtxn.Commit()
}

// ciHive is a started cilium hive.
type ciHive struct {
	h   *chive.Hive
	log *slog.Logger
}

// startCiliumHive starts a hive of cilium's statedb (with its default
// metrics), job and simple health cells and of cells, which hold the
// workload. Stop it with stop.
func startCiliumHive(tb testing.TB, cells ...ccell.Cell) *ciHive {
	all := append([]ccell.Cell{
		ccell.SimpleHealthCell,
		cstatedb.Cell,
		cjob.Cell,
	}, cells...)
	h := &ciHive{h: chive.New(all...), log: slog.New(slog.DiscardHandler)}
	if err := h.h.Start(h.log, context.Background()); err != nil {
		tb.Fatal(err)
	}
	return h
}

// stop stops the hive and waits for its jobs to return.
func (h *ciHive) stop(tb testing.TB) {
	if err := h.h.Stop(h.log, context.Background()); err != nil {
		tb.Error(err)
	}
}
