package routes_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/steadystate/steadystate/examples/routes"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// Example wires a routes table, a target in a network namespace and a
// reconciler, and applies one route. (It needs root and a namespace, so it
// is compiled but not run by go test.)
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	db := statedb.New()
	table, err := routes.NewTable(db)
	if err != nil {
		panic(err)
	}
	target, err := routes.NewTarget(routes.TargetConfig{NetNS: "example"})
	if err != nil {
		panic(err)
	}
	defer target.Close()
	r, err := reconciler.New(db, routes.ReconcilerConfig(table, target))
	if err != nil {
		panic(err)
	}
	go r.Run(ctx)

	// A writer: validate, set Pending, insert, commit.
	route := &routes.Route{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Type: routes.TypeBlackhole}
	if err := route.Validate(); err != nil {
		panic(err)
	}
	wtxn := db.WriteTxn(table)
	table.Insert(wtxn, route.SetStatus(reconciler.StatusPending()))
	rev := table.Revision(wtxn.Commit())

	if _, err := r.WaitUntilReconciled(ctx, rev); err != nil {
		panic(err)
	}
	obj, _, _ := table.Get(db.ReadTxn(), routes.PrimaryIndex.Query(route.Key()))
	fmt.Println(obj, obj.Status.Kind)
}

// ExampleParseRouteKey shows the text form of a route's identity, as the
// HTTP API and the CLI take it.
func ExampleParseRouteKey() {
	k, err := routes.ParseRouteKey("0/2001:db8::/32/0")
	if err != nil {
		panic(err)
	}
	fmt.Println(k)
	// Output: 254/2001:db8::/32/1024
}
