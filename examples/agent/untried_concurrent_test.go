package main

import (
	"net/netip"
	"sync"
	"testing"

	"github.com/steadystate/steadystate/examples/routes"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// Callers holding snapshots of different revisions, asking at once while
// a writer changes statuses, each get their own snapshot's count: the
// memo never answers one revision with another's.
func TestUntriedCountConcurrent(t *testing.T) {
	db := statedb.New()
	table, err := routes.NewTable(db)
	if err != nil {
		t.Fatal(err)
	}
	u := &untriedCount[*routes.Route]{table: table, getStatus: (*routes.Route).GetStatus}
	const n = 64
	route := func(i int, s reconciler.Status) *routes.Route {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(i), 0}), 24)
		return &routes.Route{Prefix: p, Type: routes.TypeBlackhole, Status: s}
	}
	wtxn := db.WriteTxn(table)
	for i := range n {
		table.Insert(wtxn, route(i, reconciler.StatusPending()))
	}
	wtxn.Commit()
	var writer, readers sync.WaitGroup
	stop := make(chan struct{})
	writer.Add(1)
	go func() { // one route Done per commit, then all Pending again
		defer writer.Done()
		for round := 0; ; round++ {
			for i := range n {
				select {
				case <-stop:
					return
				default:
				}
				s := reconciler.StatusDone()
				if round%2 == 1 {
					s = reconciler.StatusPending()
				}
				wtxn := db.WriteTxn(table)
				table.Insert(wtxn, route(i, s))
				wtxn.Commit()
			}
		}
	}()
	errs := make(chan string, 4)
	for range 4 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			var old []statedb.ReadTxn
			for j := range 2000 {
				txn := db.ReadTxn()
				if j%3 == 0 && len(old) > 0 {
					txn = old[j%len(old)] // an older snapshot
				}
				old = append(old[:min(len(old), 15)], txn)
				if got, want := u.count(txn), notTried(txn, table, (*routes.Route).GetStatus); got != want {
					select {
					case errs <- "":
						t.Errorf("revision %d: count %d, want %d", table.Revision(txn), got, want)
					default:
					}
					return
				}
			}
		}()
	}
	readers.Wait()
	close(stop)
	writer.Wait()
}
