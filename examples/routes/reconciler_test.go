package routes

import (
	"net/netip"
	"testing"

	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// TestReconcilerConfig checks the documented fields of ReconcilerConfig
// and that reconciler.New accepts the result.
func TestReconcilerConfig(t *testing.T) {
	db := statedb.New()
	table, err := NewTable(db)
	if err != nil {
		t.Fatal(err)
	}
	target := &Target{proto: DefaultProtocol} // never called here
	cfg := ReconcilerConfig(table, target)
	if cfg.Name != "routes" || cfg.Table != table || cfg.Target != target {
		t.Fatalf("config %+v: want name routes, the table and the target", cfg)
	}
	if cfg.FullReconciliationInterval != 0 || cfg.IncrementalRoundSize != 0 {
		t.Fatalf("config %+v: want the reconciler's defaults", cfg)
	}
	r := &Route{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Type: TypeBlackhole}
	c := cfg.CloneObject(r)
	if c == r || !c.Equal(r) {
		t.Fatal("CloneObject does not clone")
	}
	if got := cfg.SetObjectStatus(c, reconciler.StatusDone()); got != c || cfg.GetObjectStatus(c).Kind != reconciler.StatusKindDone {
		t.Fatal("SetObjectStatus/GetObjectStatus do not set and get the status")
	}
	if _, err := reconciler.New(db, cfg); err != nil {
		t.Fatalf("reconciler.New: %v", err)
	}
}
