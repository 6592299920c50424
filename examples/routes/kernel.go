package routes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// This file holds the target's batch operations and its reads of the
// kernel. Every function here runs with t.mu held and the target open.

// UpdateBatch applies a round of routes (see Update for one). A batch of
// at least lookupFirst routes is first compared with one listing of each
// of its tables (and families), unless the last such batch found most of
// its routes missing (a bulk load: listings would only grow with the
// table): routes already as desired are not written at all, the target's
// routes that differ are replaced, another protocol's route fails its
// entry with ErrForeignRoute, and only the missing routes are added. So
// the rounds of a restart over routes already in place cost a listing
// each and write nothing. Other batches (an edit, a bulk load) add every
// route exclusively (NLM_F_EXCL), in one pipeline run, without a listing:
// for new routes that is all there is to do. In both cases a route whose
// add finds its identity taken (EEXIST) is looked up, once per table and
// family for the batch, and decided as above.
func (t *Target) UpdateBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[*Route]) {
	t.mu.Lock()
	defer t.mu.Unlock()
	defer t.watched.compact() // the watch's maps' peaks (see DeleteBatch)
	if err := t.connect(); err != nil {
		failAll(batch, err)
		return
	}
	devs := map[string]int{} // device indexes, looked up once per batch
	if len(batch) >= lookupFirst {
		t.watched.expecting(len(batch))
	}
	ops := make([]routeOp, 0, len(batch))
	entry := make([]int, 0, len(batch)) // ops[j] is for batch[entry[j]]
	for i := range batch {
		e := &batch[i]
		e.Result = nil
		if err := ctx.Err(); err != nil {
			e.Result = err
			continue
		}
		if err := e.Object.Validate(); err != nil {
			e.Result = reconciler.Terminal(err)
			continue
		}
		t.watched.track(e.Object)
		kr, err := t.kroute(e.Object, devs)
		if err != nil {
			e.Result = err
			continue
		}
		ops = append(ops, routeOp{kind: opAdd, route: kr})
		entry = append(entry, i)
		// Before the write, so that the watch knows its notification.
		t.watched.expect(kr)
	}
	large := len(ops) >= lookupFirst
	if large && !t.bulkLoad {
		ops, entry = t.compareFirst(batch, ops, entry)
	}
	t.p.run(ops, t.proto)
	defer func() {
		for j := range ops {
			if batch[entry[j]].Result != nil {
				t.watched.unexpect(ops[j].route.key)
			}
		}
	}()

	var taken []int // indexes into ops
	added := 0
	defer func() {
		if large {
			t.bulkLoad = added > len(batch)/2
		}
	}()
	for j := range ops {
		if ops[j].kind == opAdd && ops[j].err == nil {
			added++
		}
		switch err := ops[j].err; {
		case err == nil:
		case ops[j].kind == opAdd && errors.Is(err, unix.EEXIST):
			taken = append(taken, j)
		case ops[j].kind == opReplace:
			batch[entry[j]].Result = kernelError("replacing", batch[entry[j]].Object, err)
		default:
			batch[entry[j]].Result = kernelError("adding", batch[entry[j]].Object, err)
		}
	}
	if len(taken) == 0 {
		return
	}
	keys := make([]RouteKey, len(taken))
	for n, j := range taken {
		keys[n] = ops[j].route.key
	}
	current, lookupErr := t.lookup(keys)
	var replace []routeOp
	var replaceOf []int // replace[n] is for ops[replaceOf[n]]
	for _, j := range taken {
		e := &batch[entry[j]]
		if lookupErr != nil {
			e.Result = fmt.Errorf("route %s exists; listing routes to see whose: %w", e.Object, lookupErr)
			continue
		}
		cur, found := current[ops[j].route.key]
		switch {
		case found && cur.proto != t.proto:
			e.Result = t.foreign(e.Object, cur)
		case found && sameRoute(cur, &ops[j].route):
			// Already as desired: read before write.
		default:
			// Ours and different, or gone since the add: replace.
			replace = append(replace, routeOp{kind: opReplace, route: ops[j].route})
			replaceOf = append(replaceOf, j)
		}
	}
	t.p.run(replace, t.proto)
	for n, j := range replaceOf {
		if err := replace[n].err; err != nil {
			batch[entry[j]].Result = kernelError("replacing", batch[entry[j]].Object, err)
		}
	}
}

// lookupFirst is the smallest batch that UpdateBatch compares with a
// listing of its tables before it writes. A listing costs as much as the
// table is large, whatever the batch: worth it for the many routes of a
// restart's rounds, most of them already in place, not for the few of an
// edit, which are most often new, nor for the rounds of a bulk load.
const lookupFirst = 64

// compareFirst compares the adds ops (for batch[entry[j]]) with one
// listing of their tables and returns the writes still needed: adds of
// the missing routes, replaces of the target's routes that differ. A
// route already as desired needs none; one of another protocol fails its
// entry with ErrForeignRoute. If the listing fails, every add is left as
// it is. t.mu is held.
func (t *Target) compareFirst(batch []reconciler.BatchEntry[*Route], ops []routeOp, entry []int) ([]routeOp, []int) {
	keys := make([]RouteKey, len(ops))
	for j := range ops {
		keys[j] = ops[j].route.key
	}
	current, err := t.lookup(keys)
	if err != nil {
		return ops, entry // the adds find out, as in a small batch
	}
	n := 0
	for j := range ops {
		op := ops[j]
		cur, found := current[op.route.key]
		switch {
		case !found:
		case cur.proto != t.proto:
			batch[entry[j]].Result = t.foreign(batch[entry[j]].Object, cur)
			t.watched.unexpect(op.route.key)
			continue
		case sameRoute(cur, &op.route):
			continue // already as desired: no write
		default:
			op.kind = opReplace
		}
		ops[n], entry[n] = op, entry[j]
		n++
	}
	return ops[:n], entry[:n]
}

// foreign is the error of r, whose identity the kernel's route cur of
// another protocol has.
func (t *Target) foreign(r *Route, cur kernelRoute) error {
	return fmt.Errorf("route %s: %w (protocol %s, not %d); remove it or change the desired route's table or metric",
		r, ErrForeignRoute, netlink.RouteProtocol(cur.proto), t.proto)
}

// DeleteBatch deletes a round of routes (see Delete for one). A delete
// names the route's identity and the target's protocol, so the kernel
// itself refuses to delete another protocol's route. IPv4 metric 0 is the
// exception: the kernel reads it as "any metric", so those routes are
// looked up first, lest a delete of metric 0 remove the target's route
// with another metric.
func (t *Target) DeleteBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[*Route]) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.connect(); err != nil {
		failAll(batch, err)
		return
	}
	var ambiguous []int
	var ambiguousKeys []RouteKey
	for i := range batch {
		e := &batch[i]
		e.Result = nil
		if !e.Object.validIdentity() {
			continue // never installed: the kernel would have refused it
		}
		t.watched.untrack(e.Object.Key())
		if k := e.Object.Key(); k.Prefix.Addr().Is4() && k.Metric == 0 {
			ambiguous = append(ambiguous, i)
			ambiguousKeys = append(ambiguousKeys, k)
		}
	}
	t.watched.compact()
	var current map[RouteKey]kernelRoute
	var lookupErr error
	if len(ambiguous) > 0 {
		current, lookupErr = t.lookup(ambiguousKeys)
	}

	ops := make([]routeOp, 0, len(batch))
	entry := make([]int, 0, len(batch))
	for i := range batch {
		e := &batch[i]
		if err := ctx.Err(); err != nil {
			e.Result = err
			continue
		}
		if !e.Object.validIdentity() {
			continue
		}
		k := e.Object.Key()
		t.watched.unexpect(k)
		if k.Prefix.Addr().Is4() && k.Metric == 0 {
			if lookupErr != nil {
				e.Result = fmt.Errorf("deleting route %s: listing routes: %w", e.Object, lookupErr)
				continue
			}
			if cur, ok := current[k]; !ok || cur.proto != t.proto {
				continue // none of ours with metric 0
			}
		}
		ops = append(ops, routeOp{kind: opDelete, route: kroute{key: k}})
		entry = append(entry, i)
	}
	t.p.run(ops, t.proto)
	for j := range ops {
		if err := ops[j].err; err != nil && !isGone(err) {
			batch[entry[j]].Result = kernelError("deleting", batch[entry[j]].Object, err)
		}
	}
}

// isGone reports whether err is the kernel's answer to deleting a route
// that does not exist (or not with the target's protocol).
func isGone(err error) bool {
	return errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENOENT)
}

// validIdentity reports whether r's table, prefix and metric could be those
// of a route in the kernel.
func (r *Route) validIdentity() bool {
	p := r.Prefix
	return p.IsValid() && p.Masked() == p && r.Table >= 0 && r.Table <= math.MaxUint32 &&
		r.Metric >= 0 && r.Metric <= math.MaxUint32
}

func failAll(batch []reconciler.BatchEntry[*Route], err error) {
	for i := range batch {
		batch[i].Result = err
	}
}

// kroute returns r as the target installs it. Like `ip route`, it gives a
// unicast route without a next hop the link scope.
func (t *Target) kroute(r *Route, devs map[string]int) (kroute, error) {
	kr := kroute{key: r.Key(), typ: rtnType(r.Type), via: r.Via, scope: unix.RT_SCOPE_UNIVERSE}
	if r.Type == TypeUnicast && !r.Via.IsValid() {
		kr.scope = unix.RT_SCOPE_LINK
	}
	if r.Dev != "" {
		idx, ok := devs[r.Dev]
		if !ok {
			link, err := t.h.LinkByName(r.Dev)
			var notFound netlink.LinkNotFoundError
			switch {
			case errors.As(err, &notFound):
				idx = -1
			case err != nil:
				return kr, fmt.Errorf("route %s: looking up device %q: %w", r, r.Dev, err)
			default:
				idx = link.Attrs().Index
			}
			devs[r.Dev] = idx
		}
		if idx < 0 {
			return kr, fmt.Errorf("route %s: %w: %q (the route applies once it exists)", r, ErrDeviceNotFound, r.Dev)
		}
		kr.oif = idx
	}
	return kr, nil
}

// rtnType is the kernel's route type (RTN_*) of a Route's Type.
func rtnType(typ string) uint8 {
	switch typ {
	case TypeBlackhole:
		return unix.RTN_BLACKHOLE
	case TypeUnreachable:
		return unix.RTN_UNREACHABLE
	case TypeProhibit:
		return unix.RTN_PROHIBIT
	default:
		return unix.RTN_UNICAST
	}
}

// sameRoute reports whether the kernel's route cur is what want would
// install. A device that want leaves to the kernel is not compared.
func sameRoute(cur kernelRoute, want *kroute) bool {
	if cur.typ != want.typ {
		return false
	}
	if want.typ != unix.RTN_UNICAST {
		return true
	}
	return cur.nexthops == 0 && cur.gw == want.via && (want.oif == 0 || cur.oif == want.oif)
}

// kernelRoute is a route of the kernel as the target compares it: its
// identity, protocol, type, gateway, device and number of next hops (of
// a multipath route; 0 otherwise). Listings decode only these (see
// dump.go).
type kernelRoute struct {
	key      RouteKey
	proto    int
	typ      uint8
	gw       netip.Addr // invalid: none
	oif      int        // 0: none
	nexthops int
}

// kernelRouteOf is nr, with identity k, as the target compares it.
func kernelRouteOf(nr netlink.Route, k RouteKey) kernelRoute {
	gw, _ := netip.AddrFromSlice(nr.Gw)
	return kernelRoute{key: k, proto: int(nr.Protocol), typ: uint8(nr.Type), gw: gw.Unmap(), oif: nr.LinkIndex, nexthops: len(nr.MultiPath)}
}

// maxDumpAttempts bounds the retries of a route listing that the kernel
// interrupted because the routes changed meanwhile.
const maxDumpAttempts = 3

// lookup returns the kernel's routes with the given identities, listing
// each table of each family involved once.
func (t *Target) lookup(keys []RouteKey) (map[RouteKey]kernelRoute, error) {
	type tableOf struct {
		family int
		table  uint32
	}
	var tables []tableOf
	seen := map[tableOf]bool{}
	for _, k := range keys {
		tf := tableOf{netlink.FAMILY_V4, k.Table}
		if k.Prefix.Addr().Is6() {
			tf.family = netlink.FAMILY_V6
		}
		if !seen[tf] {
			seen[tf] = true
			tables = append(tables, tf)
		}
	}
	// The maps are made, at their full size, once the kernel lists a
	// route: the first batch of a start, into empty tables, makes none
	// (they were 16 MB for 50,000 routes).
	var want map[RouteKey]struct{}
	var found map[RouteKey]kernelRoute
	wanted := func(k RouteKey, _ int) bool {
		if want == nil {
			want = make(map[RouteKey]struct{}, len(keys))
			for _, k := range keys {
				want[k] = struct{}{}
			}
		}
		_, ok := want[k]
		return ok
	}
	add := func(kr kernelRoute) {
		if found == nil {
			found = make(map[RouteKey]kernelRoute, len(keys))
		}
		found[kr.key] = kr
	}
	for _, tf := range tables {
		// As list, but into found: no slice of the table's routes.
		var err error
		for range maxDumpAttempts {
			t.listings.Add(1)
			err = t.p.listEach(tf.family, tf.table, 0, wanted, add)
			if !errors.Is(err, netlink.ErrDumpInterrupted) {
				break
			}
			// What the interrupted listing found may be gone: from
			// nothing again (for this table and family).
			maps.DeleteFunc(found, func(k RouteKey, _ kernelRoute) bool {
				return k.Table == tf.table && k.Prefix.Addr().Is6() == (tf.family == netlink.FAMILY_V6)
			})
		}
		if errors.Is(err, unix.ENOENT) {
			continue // a table the kernel does not have yet
		}
		if err != nil {
			return nil, err
		}
	}
	return found, nil
}

// kernelKey returns the identity of a listed route; ok is false for a route
// that no Route can have (a TOS, an unknown family).
func kernelKey(nr netlink.Route) (k RouteKey, ok bool) {
	if nr.Tos != 0 {
		return k, false
	}
	var a netip.Addr
	bits := 0
	switch nr.Family {
	case netlink.FAMILY_V4:
		a = netip.IPv4Unspecified()
	case netlink.FAMILY_V6:
		a = netip.IPv6Unspecified()
	default:
		return k, false
	}
	if nr.Dst != nil {
		var good bool
		if a.Is4() {
			a, good = netip.AddrFromSlice(nr.Dst.IP.To4())
		} else {
			a, good = netip.AddrFromSlice(nr.Dst.IP.To16())
		}
		if !good {
			return k, false
		}
		bits, _ = nr.Dst.Mask.Size()
	}
	p := netip.PrefixFrom(a, bits)
	if !p.IsValid() {
		return k, false
	}
	return RouteKey{Table: uint32(nr.Table), Prefix: p.Masked(), Metric: uint32(nr.Priority)}, true
}
