package iptables

import (
	"strings"
	"testing"

	"github.com/steadystate/steadystate/examples/netnstest"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/hivetest"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
	"github.com/steadystate/steadystate/statedb/statedbcell"
)

// Cell in a hive: the program provides a TargetConfig without Rules and
// writes the table; the module's target works on the module's table.
func TestCell(t *testing.T) {
	netnstest.RequireCommand(t, "iptables-restore")
	ns := netnstest.New(t)
	var (
		db    *statedb.DB
		table statedb.RWTable[*Rule]
		r     reconciler.Reconciler[*Rule]
	)
	hivetest.Start(t,
		statedbcell.Cell,
		cell.Provide(func() TargetConfig { return TargetConfig{NetNS: string(ns)} }),
		Cell,
		cell.Invoke(func(d *statedb.DB, tbl statedb.RWTable[*Rule], rec reconciler.Reconciler[*Rule]) {
			db, table, r = d, tbl, rec
		}),
	)
	wtxn := db.WriteTxn(table)
	table.Insert(wtxn, filterIn("ssh", 10, "-p tcp --dport 22 -j ACCEPT").SetStatus(reconciler.StatusPending()))
	rev := table.Revision(wtxn.Commit())
	if _, err := r.WaitUntilReconciled(t.Context(), rev); err != nil {
		t.Fatal(err)
	}
	out, err := ns.Command("iptables-save", "-t", "filter")
	if err != nil || !strings.Contains(string(out), "-A STEADYSTATE-INPUT -p tcp -m tcp --dport 22 -j ACCEPT") {
		t.Fatalf("iptables-save: %v\n%s", err, out)
	}
}
