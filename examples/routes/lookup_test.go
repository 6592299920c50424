package routes

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/steadystate/steadystate/statedb"
)

// Lookup answers "which desired route covers this address" per routing
// table: checked against a brute-force scan over random overlapping routes
// in three routing tables.
func TestLookup(t *testing.T) {
	db := statedb.New()
	table, err := NewTable(db)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 11))
	var all []*Route
	wtxn := db.WriteTxn(table)
	for range 400 {
		bits := rng.IntN(17) + 8
		addr := netip.AddrFrom4([4]byte{10, byte(rng.IntN(4)), byte(rng.IntN(256)), 0})
		r := &Route{Prefix: netip.PrefixFrom(addr, bits).Masked(), Type: "blackhole",
			Table: []int{0, 100, 200}[rng.IntN(3)], Metric: rng.IntN(3)}
		if _, _, err := table.Insert(wtxn, r); err != nil {
			t.Fatal(err)
		}
	}
	txn := wtxn.Commit()
	for r := range table.All(txn) {
		all = append(all, r)
	}
	for range 2000 {
		addr := netip.AddrFrom4([4]byte{10, byte(rng.IntN(5)), byte(rng.IntN(256)), byte(rng.IntN(256))})
		rt := []int{0, 100, 200, 300}[rng.IntN(4)]
		var want *Route
		for _, r := range all {
			if !r.Prefix.Contains(addr) || effectiveTable(r.Table) != effectiveTable(rt) {
				continue
			}
			if want == nil || r.Prefix.Bits() > want.Prefix.Bits() ||
				r.Prefix.Bits() == want.Prefix.Bits() && r.Metric < want.Metric {
				want = r
			}
		}
		got, found := Lookup(txn, table, addr, rt)
		if found != (want != nil) || found && got.Key() != want.Key() {
			t.Fatalf("Lookup(%s, table %d) = %v, %v; want %v", addr, rt, got, found, want)
		}
	}
}
