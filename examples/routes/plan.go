package routes

import (
	"context"
	"fmt"
	"iter"
	"net/netip"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// The target's plan: what Update, Delete and Prune would change, read from
// the kernel's routes with the same lookups and decided by the same rules
// (sameRoute, the protocol), without a write. A change names the route by
// its identity, "route 10.0.0.0/8 table 100 metric 5" (the main table and
// the default metric left out), and says in its detail what is added or
// removed ("blackhole", "via 192.0.2.2 dev v0") or what differs ("gw
// 192.0.2.2 -> 192.0.2.3, dev v0 -> v1").

var _ reconciler.Planner[*Route] = (*Target)(nil)

// PlanUpdate returns what Update would change: adding r when no route has
// its identity, replacing the target's route with it when that differs
// (with the attributes that differ), or nothing. Its errors are Update's:
// an invalid route (terminal), ErrForeignRoute when another protocol's
// route has the identity, ErrDeviceNotFound, the error of listing the
// routes, ctx's, ErrTargetClosed.
func (t *Target) PlanUpdate(ctx context.Context, txn statedb.ReadTxn, r *Route) (reconciler.Plan, error) {
	b := []reconciler.PlanEntry[*Route]{{Object: r}}
	t.PlanUpdateBatch(ctx, txn, b)
	return b[0].Plan, b[0].Result
}

var _ reconciler.BatchPlanner[*Route] = (*Target)(nil)

// PlanUpdateBatch implements reconciler.BatchPlanner: each entry gets the
// plan and error of PlanUpdate, for one listing of each routing table
// (and family) of the batch instead of one per route.
func (t *Target) PlanUpdateBatch(ctx context.Context, _ statedb.ReadTxn, batch []reconciler.PlanEntry[*Route]) {
	for i := range batch {
		batch[i].Plan, batch[i].Result = nil, nil
	}
	if err := ctx.Err(); err != nil {
		failPlans(batch, err)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.connect(); err != nil {
		failPlans(batch, err)
		return
	}
	devs := map[string]int{}
	wants := make([]kroute, len(batch))
	planned := make([]bool, len(batch))
	keys := make([]RouteKey, 0, len(batch))
	for i := range batch {
		e := &batch[i]
		if err := e.Object.Validate(); err != nil {
			e.Result = reconciler.Terminal(err)
			continue
		}
		t.watched.track(e.Object)
		want, err := t.kroute(e.Object, devs)
		if err != nil {
			e.Result = err
			continue
		}
		wants[i], planned[i] = want, true
		keys = append(keys, want.key)
	}
	if len(keys) == 0 {
		return
	}
	current, err := t.lookup(keys)
	for i := range batch {
		e := &batch[i]
		switch {
		case !planned[i]:
		case err != nil:
			e.Result = fmt.Errorf("planning route %s: listing routes: %w", e.Object, err)
		default:
			e.Plan, e.Result = t.planAgainst(e.Object, &wants[i], current)
		}
	}
}

// planAgainst is the plan of installing want (for r) given the kernel's
// routes current. t.mu is held.
func (t *Target) planAgainst(r *Route, want *kroute, current map[RouteKey]kernelRoute) (reconciler.Plan, error) {
	cur, found := current[want.key]
	switch {
	case !found:
		return reconciler.Plan{{Action: reconciler.ActionAdd, Object: routeName(want.key), Detail: t.attrs(want.typ, want.via, want.oif)}}, nil
	case cur.proto != t.proto:
		return nil, t.foreign(r, cur)
	case sameRoute(cur, want):
		t.watched.expect(*want) // as the target would write it: its notifications are no drift
		return nil, nil
	}
	detail := strings.Join(t.differences(cur, want), ", ")
	if detail == "" {
		detail = "replaced" // sameRoute and differences disagree: say so rather than nothing
	}
	return reconciler.Plan{{Action: reconciler.ActionChange, Object: routeName(want.key), Detail: detail}}, nil
}

func failPlans(batch []reconciler.PlanEntry[*Route], err error) {
	for i := range batch {
		batch[i].Result = err
	}
}

// PlanDelete returns what Delete would change: removing the target's route
// with r's identity, if there is one. A route of another protocol there is
// never removed, so it plans nothing. Errors: listing the routes, ctx's,
// ErrTargetClosed.
func (t *Target) PlanDelete(ctx context.Context, _ statedb.ReadTxn, r *Route) (reconciler.Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !r.validIdentity() {
		return nil, nil // never installed
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.connect(); err != nil {
		return nil, err
	}
	k := r.Key()
	current, err := t.lookup([]RouteKey{k})
	if err != nil {
		return nil, fmt.Errorf("planning the delete of route %s: listing routes: %w", r, err)
	}
	if cur, ok := current[k]; ok && cur.proto == t.proto {
		return reconciler.Plan{t.removal(cur)}, nil
	}
	return nil, nil
}

// PlanPrune returns what Prune would change: removing every route of the
// target's protocol whose identity is not desired, IPv4 first, in the
// kernel's order. Routes of other protocols are never candidates. Errors:
// listing the routes, ctx's, ErrTargetClosed.
func (t *Target) PlanPrune(ctx context.Context, _ statedb.ReadTxn, desired iter.Seq2[*Route, statedb.Revision]) (reconciler.Plan, error) {
	keep := map[RouteKey]struct{}{}
	for r := range desired {
		keep[r.Key()] = struct{}{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.connect(); err != nil {
		return nil, err
	}
	var plan reconciler.Plan
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		stale, err := t.stale(family, keep)
		if err != nil {
			return nil, err
		}
		for _, kr := range stale {
			plan = append(plan, t.removal(kr))
		}
	}
	return plan, ctx.Err()
}

// stale lists the routes of family and of the target's protocol whose
// identity is not in keep: what Prune deletes. t.mu is held.
func (t *Target) stale(family int, keep map[RouteKey]struct{}) ([]kernelRoute, error) {
	routes, err := t.list(family, 0, t.proto, func(k RouteKey, proto int) bool {
		_, desired := keep[k]
		return !desired && proto == t.proto
	})
	if err != nil {
		return nil, fmt.Errorf("listing routes of protocol %d: %w", t.proto, err)
	}
	return routes, nil
}

// removal is the change of deleting the kernel's route kr.
func (t *Target) removal(kr kernelRoute) reconciler.Change {
	return reconciler.Change{Action: reconciler.ActionRemove, Object: routeName(kr.key), Detail: t.attrs(kr.typ, kr.gw, kr.oif)}
}

// routeName names a route by its identity: "route 10.0.0.0/8", with
// " table T" unless main and " metric M" unless the family's default.
func routeName(k RouteKey) string {
	s := "route " + k.Prefix.String()
	if k.Table != MainTable {
		s += " table " + strconv.FormatUint(uint64(k.Table), 10)
	}
	if def := effectiveMetric(k.Prefix, 0); k.Metric != def {
		s += " metric " + strconv.FormatUint(uint64(k.Metric), 10)
	}
	return s
}

// attrs describes what a route is besides its identity: "blackhole",
// "via 192.0.2.2 dev v0", "dev lo".
func (t *Target) attrs(typ uint8, via netip.Addr, oif int) string {
	var parts []string
	if typ != unix.RTN_UNICAST {
		parts = append(parts, typeName(typ))
	}
	if via.IsValid() {
		parts = append(parts, "via "+via.String())
	}
	if oif != 0 {
		parts = append(parts, "dev "+t.devName(oif))
	}
	return strings.Join(parts, " ")
}

// differences lists how the kernel's route cur differs from want, in the
// terms of sameRoute: the type; for unicast, several next hops, the
// gateway, and the device when want names one.
func (t *Target) differences(cur kernelRoute, want *kroute) []string {
	if cur.typ != want.typ {
		return []string{"type " + typeName(cur.typ) + " -> " + typeName(want.typ)}
	}
	if want.typ != unix.RTN_UNICAST {
		return nil
	}
	var diffs []string
	if n := cur.nexthops; n > 0 {
		diffs = append(diffs, "nexthops "+strconv.Itoa(n)+" -> 1")
	}
	if cur.gw != want.via {
		diffs = append(diffs, "gw "+addrOrNone(cur.gw)+" -> "+addrOrNone(want.via))
	}
	if want.oif != 0 && cur.oif != want.oif {
		diffs = append(diffs, "dev "+t.devName(cur.oif)+" -> "+t.devName(want.oif))
	}
	return diffs
}

// devName names the device of index i, or "#i" if it cannot be found.
func (t *Target) devName(i int) string {
	if i == 0 {
		return "none"
	}
	if link, err := t.h.LinkByIndex(i); err == nil {
		return link.Attrs().Name
	}
	return "#" + strconv.Itoa(i)
}

func addrOrNone(a netip.Addr) string {
	if !a.IsValid() {
		return "none"
	}
	return a.String()
}

// typeName is the name `ip route` gives a route type.
func typeName(typ uint8) string {
	switch typ {
	case unix.RTN_UNICAST:
		return "unicast"
	case unix.RTN_BLACKHOLE:
		return TypeBlackhole
	case unix.RTN_UNREACHABLE:
		return TypeUnreachable
	case unix.RTN_PROHIBIT:
		return TypeProhibit
	case unix.RTN_LOCAL:
		return "local"
	case unix.RTN_THROW:
		return "throw"
	}
	return strconv.Itoa(int(typ))
}
