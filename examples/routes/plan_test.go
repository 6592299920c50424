package routes

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/steadystate/steadystate/reconciler"
)

// planOf returns the plans of updating each route, one change a line.
func planOf(t *testing.T, w *world, routes ...*Route) string {
	t.Helper()
	var all reconciler.Plan
	for _, r := range routes {
		p, err := w.target.PlanUpdate(context.Background(), nil, r)
		if err != nil {
			t.Fatalf("PlanUpdate(%s): %v", r, err)
		}
		all = append(all, p...)
	}
	return all.String()
}

func prunePlan(t *testing.T, w *world) string {
	t.Helper()
	p, err := w.target.PlanPrune(context.Background(), nil, w.table.All(w.db.ReadTxn()))
	if err != nil {
		t.Fatal(err)
	}
	return p.String()
}

func TestRouteName(t *testing.T) {
	for _, tt := range []struct {
		k    RouteKey
		want string
	}{
		{NewRouteKey(0, route("10.0.0.0/8 dev lo").Prefix, 0), "route 10.0.0.0/8"},
		{NewRouteKey(100, route("10.0.0.0/8 dev lo").Prefix, 5), "route 10.0.0.0/8 table 100 metric 5"},
		{NewRouteKey(0, route("2001:db8::/32 dev lo").Prefix, 0), "route 2001:db8::/32"},
		{NewRouteKey(0, route("2001:db8::/32 dev lo").Prefix, 7), "route 2001:db8::/32 metric 7"},
	} {
		if got := routeName(tt.k); got != tt.want {
			t.Errorf("routeName(%v) = %q, want %q", tt.k, got, tt.want)
		}
	}
}

// Against the kernel, in a namespace: the plans are empty once the desired
// routes are applied; drift made with `ip route` shows in the plans with
// the attributes that differ, and the Updates then repair it; PlanPrune
// lists the target's leftover and never a route of another protocol; a
// plan changes nothing.
func TestPlanInNamespace(t *testing.T) {
	// Without the watch, which would repair the drift made by hand.
	w := newWorldWith(t, TargetConfig{DisableWatch: true})
	desired := applyDesired(t, w)
	if p := planOf(t, w, desired...); p != "" {
		t.Fatalf("plans after the apply:\n%s", p)
	}
	if p := prunePlan(t, w); p != "" {
		t.Fatalf("prune plan after the apply:\n%s", p)
	}

	// Drift by hand.
	w.ip("route", "del", "10.0.0.0/8")
	w.ip("route", "replace", "10.2.0.0/16", "via", "192.0.2.9", "proto", "254")
	w.ip("route", "replace", "10.3.0.0/16", "via", "192.0.2.2", "dev", "v0", "table", "100", "metric", "10", "proto", "254")
	w.ip("route", "replace", "prohibit", "10.4.0.0/16", "table", "1000", "proto", "254")
	w.ip("-6", "route", "replace", "2001:db8:2::/48", "via", "2001:db8:ff::9", "dev", "v0", "proto", "254")
	// A leftover of the target's protocol, and routes of others.
	w.ip("route", "add", "blackhole", "10.6.0.0/16", "proto", "254")
	w.ip("route", "add", "blackhole", "10.7.0.0/16", "table", "100", "proto", "static")
	w.ip("route", "add", "10.8.0.0/16", "dev", "lo", "proto", "bird")
	before := w.kernelRoutes()

	want := "add route 10.0.0.0/8: blackhole\n" +
		"change route 10.2.0.0/16: gw 192.0.2.9 -> 192.0.2.2\n" +
		"change route 10.4.0.0/16 table 1000: type prohibit -> unreachable\n" +
		"change route 2001:db8:2::/48: gw 2001:db8:ff::9 -> 2001:db8:ff::2\n"
	if p := planOf(t, w, desired...); p != want {
		t.Fatalf("plans after the drift:\n%s\nwant\n%s", p, want)
	}
	if p := prunePlan(t, w); p != "remove route 10.6.0.0/16: blackhole\n" {
		t.Fatalf("prune plan:\n%s", p)
	}
	if after := w.kernelRoutes(); !slices.Equal(before, after) {
		t.Fatalf("planning changed the kernel:\n%q\n%q", before, after)
	}

	// The operations do what the plans said, and then there is nothing
	// left to do.
	ctx := context.Background()
	for _, r := range desired {
		if err := w.target.Update(ctx, nil, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.target.Prune(ctx, nil, w.table.All(w.db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
	w.expectOurs(desiredInKernel...)
	if p := planOf(t, w, desired...) + prunePlan(t, w); p != "" {
		t.Fatalf("plans after the repair:\n%s", p)
	}
	for _, foreign := range []string{"blackhole 10.7.0.0/16 table 100 metric 0 proto static", "10.8.0.0/16 dev lo table main metric 0 proto bird"} {
		if !w.hasRoute(foreign) {
			t.Errorf("foreign route %q is gone", foreign)
		}
	}

	// Delete plans: the target's route goes; another protocol's route with
	// a desired identity is neither removed nor overwritten.
	p, err := w.target.PlanDelete(ctx, nil, route("10.3.0.0/16 via 192.0.2.2 dev v0 table 100 metric 10"))
	if err != nil || p.String() != "remove route 10.3.0.0/16 table 100 metric 10: via 192.0.2.2 dev v0\n" {
		t.Fatalf("PlanDelete: %q, %v", p, err)
	}
	w.ip("route", "replace", "blackhole", "10.0.0.0/8", "proto", "static")
	if p, err := w.target.PlanDelete(ctx, nil, route("blackhole 10.0.0.0/8")); err != nil || len(p) != 0 {
		t.Fatalf("PlanDelete of a route another protocol took: %q, %v", p, err)
	}
	if _, err := w.target.PlanUpdate(ctx, nil, route("blackhole 10.0.0.0/8")); !errors.Is(err, ErrForeignRoute) {
		t.Fatalf("PlanUpdate over another protocol's route: %v, want ErrForeignRoute", err)
	}
	if _, err := w.target.PlanUpdate(ctx, nil, route("10.1.2.0/8 dev lo")); !errors.Is(err, ErrInvalidRoute) || !reconciler.IsTerminal(err) {
		t.Fatalf("PlanUpdate of an invalid route: %v", err)
	}
}
