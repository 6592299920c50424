package iptables_test

import (
	"context"
	"fmt"

	"github.com/steadystate/steadystate/examples/iptables"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// A reconciler applies desired rules into the target's own chains. It
// needs root and iptables; NetNS selects the network namespace (here the
// process's own), so the example is not run by go test.
func Example() {
	db := statedb.New()
	table, _ := iptables.NewTable(db)
	target, err := iptables.NewTarget(iptables.TargetConfig{Rules: table})
	if err != nil {
		panic(err)
	}
	r, _ := reconciler.New(db, iptables.ReconcilerConfig(table, target))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx)

	wtxn := db.WriteTxn(table)
	for _, rule := range []*iptables.Rule{
		{Table: "filter", Chain: "INPUT", Name: "ssh", Priority: 10, Spec: "-p tcp --dport 22 -j ACCEPT"},
		{Table: "filter", Chain: "INPUT", Name: "drop-rest", Priority: 100, Spec: "-j DROP"},
	} {
		table.Insert(wtxn, rule.SetStatus(reconciler.StatusPending()))
	}
	rev := table.Revision(wtxn.Commit())
	if _, err := r.WaitUntilReconciled(ctx, rev); err != nil {
		fmt.Println(err) // the failing rules' statuses say why
	}
	// iptables-save now shows, in table filter:
	//   -A INPUT -m comment --comment "steadystate:hook" -j STEADYSTATE-INPUT
	//   -A STEADYSTATE-INPUT -p tcp -m tcp --dport 22 -j ACCEPT
	//   -A STEADYSTATE-INPUT -j DROP
}
