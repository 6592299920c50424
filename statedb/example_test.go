package statedb_test

import (
	"fmt"
	"net/netip"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/statedb"
)

// Route is the object of the examples.
type Route struct {
	Prefix netip.Prefix
	Dev    string
}

var (
	byPrefix = statedb.Index[*Route, netip.Prefix]{
		Name:       "prefix",
		FromObject: func(r *Route) index.KeySet { return index.NewKeySet(index.NetIPPrefix(r.Prefix)) },
		FromKey:    index.NetIPPrefix,
		Unique:     true,
	}
	byDev = statedb.Index[*Route, string]{
		Name:       "dev",
		FromObject: func(r *Route) index.KeySet { return index.NewKeySet(index.String(r.Dev)) },
		FromKey:    index.String,
	}
)

// Create a table, write in a transaction, read from a snapshot.
func Example() {
	db := statedb.New()
	routes, err := statedb.NewTable(db, "routes", byPrefix, byDev)
	if err != nil {
		panic(err)
	}

	wtxn := db.WriteTxn(routes)
	routes.Insert(wtxn, &Route{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Dev: "eth0"})
	routes.Insert(wtxn, &Route{Prefix: netip.MustParsePrefix("10.1.0.0/16"), Dev: "eth1"})
	routes.Insert(wtxn, &Route{Prefix: netip.MustParsePrefix("192.168.0.0/16"), Dev: "eth0"})
	rtxn := wtxn.Commit()

	r, rev, found := routes.Get(rtxn, byPrefix.Query(netip.MustParsePrefix("10.1.0.0/16")))
	fmt.Println(r.Dev, rev, found)
	for r := range routes.List(rtxn, byDev.Query("eth0")) {
		fmt.Println("eth0:", r.Prefix)
	}
	// Output:
	// eth1 2 true
	// eth0: 10.0.0.0/8
	// eth0: 192.168.0.0/16
}

// Wait for a change with a watch channel.
func ExampleTable_GetWatch() {
	db := statedb.New()
	routes, _ := statedb.NewTable(db, "routes", byPrefix)
	key := netip.MustParsePrefix("10.0.0.0/8")

	_, _, watch, found := routes.GetWatch(db.ReadTxn(), byPrefix.Query(key))
	fmt.Println("found:", found)

	wtxn := db.WriteTxn(routes)
	routes.Insert(wtxn, &Route{Prefix: key, Dev: "eth0"})
	wtxn.Commit()

	<-watch // closed by the commit
	r, _, _ := routes.Get(db.ReadTxn(), byPrefix.Query(key))
	fmt.Println("now:", r.Dev)
	// Output:
	// found: false
	// now: eth0
}

// Follow every insert and delete with a change iterator.
func ExampleChangeIterator() {
	db := statedb.New()
	routes, _ := statedb.NewTable(db, "routes", byPrefix)

	wtxn := db.WriteTxn(routes)
	changes, _ := routes.Changes(wtxn)
	defer changes.Close()
	r := &Route{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Dev: "eth0"}
	routes.Insert(wtxn, r)
	wtxn.Commit()

	seq, _ := changes.Next(db.ReadTxn())
	for c := range seq {
		fmt.Println(c.Object.Prefix, "deleted:", c.Deleted)
	}

	wtxn = db.WriteTxn(routes)
	routes.Delete(wtxn, r)
	wtxn.Commit()

	seq, _ = changes.Next(db.ReadTxn())
	for c := range seq {
		fmt.Println(c.Object.Prefix, "deleted:", c.Deleted)
	}
	// Output:
	// 10.0.0.0/8 deleted: false
	// 10.0.0.0/8 deleted: true
}
