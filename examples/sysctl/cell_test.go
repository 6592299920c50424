package sysctl_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/steadystate/steadystate/examples/sysctl"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/hivetest"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilercell"
	"github.com/steadystate/steadystate/statedb"
	"github.com/steadystate/steadystate/statedb/statedbcell"
)

// Cell in a hive: the program provides the TargetConfig and writes the
// table; the module's reconciler applies what it writes, with the
// reconciler config as the program decorated it.
func TestCell(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "net/ipv4"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "net/ipv4/ip_forward"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var (
		db    *statedb.DB
		table statedb.RWTable[*sysctl.Sysctl]
		r     reconciler.Reconciler[*sysctl.Sysctl]
	)
	h := hivetest.Start(t,
		statedbcell.Cell,
		reconcilercell.MetricsCell,
		cell.Provide(func() sysctl.TargetConfig { return sysctl.TargetConfig{ProcSysRoot: root} }),
		cell.Decorate(func(c reconciler.Config[*sysctl.Sysctl]) reconciler.Config[*sysctl.Sysctl] {
			c.Name = "kernel-settings"
			return c
		}, sysctl.Cell),
		cell.Invoke(func(d *statedb.DB, tbl statedb.RWTable[*sysctl.Sysctl], rec reconciler.Reconciler[*sysctl.Sysctl]) {
			db, table, r = d, tbl, rec
		}),
	)
	wtxn := db.WriteTxn(table)
	table.Insert(wtxn, (&sysctl.Sysctl{Name: "net.ipv4.ip_forward", Value: "1"}).SetStatus(reconciler.StatusPending()))
	rev := table.Revision(wtxn.Commit())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := r.WaitUntilReconciled(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "net/ipv4/ip_forward")); string(b) != "1\n" {
		t.Fatalf("ip_forward = %q, want 1", b)
	}
	// The reconciler runs under the name the decorator gave it.
	found := false
	for _, m := range h.Health().Snapshot().Children {
		for _, j := range m.Children {
			found = found || m.Name == "sysctl" && j.Name == "reconcile-kernel-settings"
		}
	}
	if !found {
		t.Errorf("no job sysctl.reconcile-kernel-settings in the health tree: the decorated config was not used")
	}
}
