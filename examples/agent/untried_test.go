package main

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/steadystate/steadystate/examples/routes"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// TestUntriedCount checks the readiness count against a pass over the
// table after random writes (inserts, status changes, deletes), and that
// it counts once per revision of the table: asked again at the same
// revision, it does not walk the table.
func TestUntriedCount(t *testing.T) {
	db := statedb.New()
	table, err := routes.NewTable(db)
	if err != nil {
		t.Fatal(err)
	}
	u := &untriedCount[*routes.Route]{table: table, getStatus: (*routes.Route).GetStatus}
	rng := rand.New(rand.NewPCG(1, 2))
	statuses := []reconciler.Status{reconciler.StatusPending(), reconciler.StatusDone(), reconciler.StatusError(errors.New("x")), {}}
	var lastRev statedb.Revision
	for step := range 200 {
		wtxn := db.WriteTxn(table)
		for range 1 + rng.IntN(20) {
			p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(rng.IntN(64)), 0}), 24)
			r := &routes.Route{Prefix: p, Type: routes.TypeBlackhole, Status: statuses[rng.IntN(len(statuses))]}
			if rng.IntN(4) == 0 {
				table.Delete(wtxn, r)
			} else {
				table.Insert(wtxn, r)
			}
		}
		wtxn.Commit()
		txn := db.ReadTxn()
		want := 0
		for r := range table.All(txn) {
			if k := r.Status.Kind; k == reconciler.StatusKindPending || k == reconciler.StatusKindUnset {
				want++
			}
		}
		before, changed := u.counts, table.Revision(txn) != lastRev
		lastRev = table.Revision(txn)
		for range 3 {
			if got := u.count(txn); got != want {
				t.Fatalf("step %d: %d not tried, want %d", step, got, want)
			}
		}
		switch n := u.counts - before; {
		case changed && n != 1:
			t.Fatalf("step %d: counted %d times for one new revision, want once", step, n)
		case !changed && n != 0:
			t.Fatalf("step %d: counted %d times though the table did not change", step, n)
		}
	}
}
