package sysctl_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/steadystate/steadystate/examples/sysctl"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// A reconciler keeps a sysctl at its desired value. The example uses a
// fake sysctl tree in a temporary directory; leave ProcSysRoot empty (and
// set NetNS) to manage the real /proc/sys.
func Example() {
	root, _ := os.MkdirTemp("", "sysctl-example")
	defer os.RemoveAll(root)
	os.MkdirAll(filepath.Join(root, "net/ipv4"), 0o755)
	os.WriteFile(filepath.Join(root, "net/ipv4/ip_forward"), []byte("0\n"), 0o644)

	db := statedb.New()
	table, _ := sysctl.NewTable(db)
	target, _ := sysctl.NewTarget(sysctl.TargetConfig{ProcSysRoot: root})
	r, _ := reconciler.New(db, sysctl.ReconcilerConfig(table, target))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	// Writers insert desired objects as Pending.
	wtxn := db.WriteTxn(table)
	table.Insert(wtxn, (&sysctl.Sysctl{Name: "net.ipv4.ip_forward", Value: "1"}).SetStatus(reconciler.StatusPending()))
	rev := table.Revision(wtxn.Commit())
	r.WaitUntilReconciled(ctx, rev)

	obj, _, _ := table.Get(db.ReadTxn(), sysctl.NameIndex.Query("net.ipv4.ip_forward"))
	value, _ := os.ReadFile(filepath.Join(root, "net/ipv4/ip_forward"))
	fmt.Printf("status %s, value %s", obj.Status.Kind, value)
	fmt.Println("original kept for Delete:", target.Originals())
	// Output:
	// status Done, value 1
	// original kept for Delete: map[net.ipv4.ip_forward:0]
}
