package statedb_test

import (
	"context"
	"fmt"
	"net/netip"
	"time"

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

// Find the route that covers an address: a longest-prefix-match index.
func ExampleLPMIndex() {
	byCover := statedb.LPMIndex[*Route]{
		Name:   "cover",
		Prefix: func(r *Route) netip.Prefix { return r.Prefix }, // FromObject for several
	}
	db := statedb.New()
	routes, err := statedb.NewTable(db, "routes", byPrefix, byCover)
	if err != nil {
		panic(err)
	}
	wtxn := db.WriteTxn(routes)
	routes.Insert(wtxn, &Route{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Dev: "eth0"})
	routes.Insert(wtxn, &Route{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Dev: "eth1"})
	routes.Insert(wtxn, &Route{Prefix: netip.MustParsePrefix("10.1.0.0/16"), Dev: "eth2"})
	rtxn := wtxn.Commit()

	addr := netip.MustParseAddr("10.1.2.3")
	r, _, _ := routes.Get(rtxn, byCover.Query(addr))
	fmt.Println("longest:", r.Prefix, r.Dev)
	for r := range routes.Matches(rtxn, byCover.Query(addr)) {
		fmt.Println("covers:", r.Prefix)
	}
	// Output:
	// longest: 10.1.0.0/16 eth2
	// covers: 10.1.0.0/16
	// covers: 10.0.0.0/8
	// covers: 0.0.0.0/0
}

// Insert or merge with the stored object in one step.
func ExampleRWTable_Modify() {
	db := statedb.New()
	routes, _ := statedb.NewTable(db, "routes", byPrefix)
	key := netip.MustParsePrefix("10.0.0.0/8")
	// merge returns a new object and leaves the stored one as it is.
	keepDev := func(old, new *Route) *Route {
		merged := *new
		if merged.Dev == "" {
			merged.Dev = old.Dev
		}
		return &merged
	}

	wtxn := db.WriteTxn(routes)
	routes.Modify(wtxn, &Route{Prefix: key, Dev: "eth0"}, keepDev)
	old, hadOld, _ := routes.Modify(wtxn, &Route{Prefix: key}, keepDev)
	rtxn := wtxn.Commit()

	r, _, _ := routes.Get(rtxn, byPrefix.Query(key))
	fmt.Println(old.Dev, hadOld, r.Dev)
	// Output: eth0 true eth0
}

// Wait on the watch channels of several queries at once.
func ExampleWatchSet() {
	db := statedb.New()
	routes, _ := statedb.NewTable(db, "routes", byPrefix, byDev)
	wtxn := db.WriteTxn(routes)
	routes.Insert(wtxn, &Route{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Dev: "eth0"})
	routes.Insert(wtxn, &Route{Prefix: netip.MustParsePrefix("10.1.0.0/16"), Dev: "eth1"})
	rtxn := wtxn.Commit()

	ws := statedb.NewWatchSet()
	queries := map[<-chan struct{}]string{}
	for _, dev := range []string{"eth0", "eth1"} {
		_, watch := routes.ListWatch(rtxn, byDev.Query(dev))
		ws.Add(watch)
		queries[watch] = dev
	}

	wtxn = db.WriteTxn(routes)
	routes.Insert(wtxn, &Route{Prefix: netip.MustParsePrefix("10.2.0.0/16"), Dev: "eth1"})
	wtxn.Commit()

	closed, err := ws.Wait(context.Background(), 10*time.Millisecond)
	for _, ch := range closed {
		fmt.Println("changed:", queries[ch], err)
	}
	fmt.Println("still watched:", ws.Len())
	// Output:
	// changed: eth1 <nil>
	// still watched: 1
}
