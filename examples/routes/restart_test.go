package routes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/steadystate/steadystate/examples/netnstest"
	"github.com/steadystate/steadystate/reconciler"
)

// updateBatch runs target's UpdateBatch over routes and returns the
// entries' results.
func updateBatch(target *Target, routes []*Route) []error {
	batch := make([]reconciler.BatchEntry[*Route], len(routes))
	for i, r := range routes {
		batch[i].Object = r
	}
	target.UpdateBatch(context.Background(), nil, batch)
	errs := make([]error, len(batch))
	for i, e := range batch {
		errs[i] = e.Result
	}
	return errs
}

// A large batch of routes already in place (a restarted agent's first
// round) is compared with one listing and writes nothing; in a batch
// with a route of its own that differs, a foreign route and a missing
// one, exactly those three are written or refused.
func TestBatchOfRoutesInPlaceWritesNothing(t *testing.T) {
	ns := netnstest.New(t)
	var routes []*Route
	for i := range 3 * lookupFirst {
		routes = append(routes, route(fmt.Sprintf("blackhole 10.%d.%d.0/24", i/256, i%256)))
	}
	routes = append(routes, route("blackhole 10.200.0.0/16 table 100"), route("blackhole 2001:db8:1::/48"))
	first, err := NewTarget(TargetConfig{NetNS: string(ns), DisableWatch: true})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	// A bulk load: the first large batch is compared with a listing of
	// its (empty) tables, finds its routes missing, and the next adds
	// without one.
	for _, part := range [][]*Route{routes[:lookupFirst], routes[lookupFirst:]} {
		for _, err := range updateBatch(first, part) {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := first.listings.Load(); n != 1 {
		t.Errorf("a bulk load of two batches made %d listings, want 1 (the first batch's)", n)
	}

	restarted, err := NewTarget(TargetConfig{NetNS: string(ns), DisableWatch: true})
	if err != nil {
		t.Fatal(err)
	}
	defer restarted.Close()
	w := netnstest.WatchWrites(t, ns)
	for _, err := range updateBatch(restarted, routes) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if written, _ := w.Stop(); len(written) != 0 {
		t.Fatalf("routes already in place written again: %q", written[:min(len(written), 5)])
	}
	if n := restarted.listings.Load(); n != 3 {
		t.Errorf("the restarted target's batch made %d listings, want 3 (tables 254 and 100, IPv6)", n)
	}

	// One of ours differs, one is another protocol's, one is missing.
	if _, err := ns.Command("ip", "route", "replace", "unreachable", "10.0.1.0/24", "proto", "254"); err != nil {
		t.Fatal(err)
	}
	if _, err := ns.Command("ip", "route", "replace", "blackhole", "10.0.2.0/24", "proto", "static"); err != nil {
		t.Fatal(err)
	}
	if _, err := ns.Command("ip", "route", "del", "10.0.3.0/24"); err != nil {
		t.Fatal(err)
	}
	w = netnstest.WatchWrites(t, ns)
	errs := updateBatch(restarted, routes)
	written, _ := w.Stop()
	for i, err := range errs {
		if i == 2 {
			if !errors.Is(err, ErrForeignRoute) {
				t.Errorf("%s: %v, want ErrForeignRoute", routes[i], err)
			}
		} else if err != nil {
			t.Errorf("%s: %v", routes[i], err)
		}
	}
	slices.Sort(written)
	want := []string{"route add 10.0.1.0/24 table 254 proto 254", "route add 10.0.3.0/24 table 254 proto 254"}
	if !slices.Equal(written, want) {
		t.Errorf("written %q, want %q", written, want)
	}
	out, err := ns.Command("ip", "route", "show", "10.0.1.0/24")
	if err != nil || string(out) != "blackhole 10.0.1.0/24 proto 254 \n" {
		t.Errorf("10.0.1.0/24 is %q (%v), want the desired blackhole", out, err)
	}
}
