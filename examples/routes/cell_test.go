package routes

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/steadystate/steadystate/examples/netnstest"
	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
	"github.com/steadystate/steadystate/statedb/statedbcell"
)

// TestReconcilerConfig checks the documented fields of ReconcilerConfig
// and that reconciler.New accepts the result.
func TestReconcilerConfig(t *testing.T) {
	db := statedb.New()
	table, err := NewTable(db)
	if err != nil {
		t.Fatal(err)
	}
	target := &Target{proto: DefaultProtocol} // never called here
	cfg := ReconcilerConfig(table, target)
	if cfg.Name != "routes" || cfg.Table != table || cfg.Target != target {
		t.Fatalf("config %+v: want name routes, the table and the target", cfg)
	}
	if cfg.FullReconciliationInterval != 0 || cfg.IncrementalRoundSize != DefaultIncrementalRoundSize {
		t.Fatalf("config %+v: want IncrementalRoundSize %d, the reconciler's defaults otherwise", cfg, DefaultIncrementalRoundSize)
	}
	r := &Route{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Type: TypeBlackhole}
	c := cfg.CloneObject(r)
	if c == r || !c.Equal(r) {
		t.Fatal("CloneObject does not clone")
	}
	if got := cfg.SetObjectStatus(c, reconciler.StatusDone()); got != c || cfg.GetObjectStatus(c).Kind != reconciler.StatusKindDone {
		t.Fatal("SetObjectStatus/GetObjectStatus do not set and get the status")
	}
	if _, err := reconciler.New(db, cfg); err != nil {
		t.Fatalf("reconciler.New: %v", err)
	}
}

// Cell in a hive: the program provides the TargetConfig and writes the
// table; the module's reconciler applies it in the namespace, and the
// target is closed when the hive stops.
func TestCell(t *testing.T) {
	ns := netnstest.New(t)
	var (
		db     *statedb.DB
		table  statedb.RWTable[*Route]
		r      reconciler.Reconciler[*Route]
		target *Target
	)
	h := hive.New(
		statedbcell.Cell,
		cell.Provide(func() TargetConfig { return TargetConfig{NetNS: string(ns)} }),
		Cell,
		cell.Invoke(func(d *statedb.DB, tbl statedb.RWTable[*Route], rec reconciler.Reconciler[*Route], tg *Target) {
			db, table, r, target = d, tbl, rec, tg
		}),
	)
	ctx := context.Background()
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	wtxn := db.WriteTxn(table)
	table.Insert(wtxn, route("blackhole 10.0.0.0/8").SetStatus(reconciler.StatusPending()))
	rev := table.Revision(wtxn.Commit())
	wctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	if _, err := r.WaitUntilReconciled(wctx, rev); err != nil {
		t.Fatal(err)
	}
	if out, err := ns.Command("ip", "route", "show", "proto", "254"); err != nil || !strings.Contains(string(out), "blackhole 10.0.0.0/8") {
		t.Fatalf("routes of the target: %q, %v", out, err)
	}
	if err := h.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := target.Update(ctx, nil, route("blackhole 10.1.0.0/16")); !errors.Is(err, ErrTargetClosed) {
		t.Fatalf("Update after the hive stopped = %v, want ErrTargetClosed", err)
	}
}
