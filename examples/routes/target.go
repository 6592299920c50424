package routes

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/steadystate/steadystate/examples/netnsutil"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// DefaultProtocol is the routing protocol number (rtm_protocol) that marks
// the routes the target installs, and by which Prune recognizes them. 254 is
// not one of the numbers reserved in /etc/iproute2/rt_protos (kernel, boot,
// static, dhcp, bird, zebra, bgp, ...), nor one used by the common routing
// daemons and CNIs. `ip route show proto 254` lists the target's routes;
// naming it in /etc/iproute2/rt_protos.d makes `ip route` print the name.
const DefaultProtocol = 0xFE

// minProtocol is the lowest protocol a target may own: 0 to 4 are unspec,
// redirect, kernel, boot and static, which belong to the kernel and to
// every administrator's `ip route add`.
const minProtocol = 5

// TargetConfig configures a Target. The zero value manages the process's
// network namespace with DefaultProtocol.
type TargetConfig struct {
	// NetNS is the network namespace whose routes the target manages: the
	// path of a namespace file (/var/run/netns/NAME, /proc/PID/ns/net) or
	// the name of one under /var/run/netns. "" is the process's own. The
	// target opens its netlink sockets there at its first operation, so
	// the namespace may be created after NewTarget.
	NetNS string
	// Protocol marks the target's routes: 5 to 255, default
	// DefaultProtocol. Give every program that manages routes a number
	// of its own: Prune deletes every route of this protocol that is not
	// desired.
	Protocol int
	// DisableWatch turns the drift watch off (see watch.go): WatchDrift
	// then only waits for its context, and routes changed behind the
	// target's back are repaired only by the reconciler's refresh by age
	// (RefreshInterval) and prune.
	DisableWatch bool
}

// Target is a reconciler.Target[*Route] (and a
// reconciler.BatchTarget[*Route], a reconciler.Planner[*Route] and
// reconciler.BatchPlanner[*Route], see plan.go, and a
// reconciler.DriftTarget[*Route], see watch.go) that applies routes over
// rtnetlink in one network namespace.
//
// Ownership: every route it installs carries its protocol number. It never
// changes or deletes a route of another protocol: Update fails with
// ErrForeignRoute when the route's identity (table, prefix, metric) is
// taken by one, Delete deletes only a route of its protocol, and Prune only
// looks at routes of its protocol.
//
// Update never rewrites a route that is already as desired: it adds
// exclusively, and only when the identity is taken does it read the
// kernel's route to decide; a large batch (a first round after a restart)
// is compared with one listing of its tables before anything is written.
// So a restart or a refresh over an unchanged state changes nothing in
// the kernel.
//
// Route changes are pipelined: a batch goes to the kernel in a few large
// writes (see pipeline), which makes 10k routes faster than `ip -batch`.
//
// A Target is safe for concurrent use; operations are serialized. Close it
// when done.
type Target struct {
	proto   int
	ns      netnsutil.NS
	noWatch bool // TargetConfig.DisableWatch

	mu     sync.Mutex      // serializes operations and Close
	closed bool            // Close was called
	h      *netlink.Handle // listings and device lookups; nil until the first operation
	p      *pipeline       // route changes; nil until the first operation
	// bulkLoad is set when the last large batch added most of its
	// routes: the next adds without a listing first (see UpdateBatch).
	bulkLoad bool
	listings atomic.Uint64 // route listings made (dump.go), for tests
	// ownFilter drops the pipeline's notifications from the watch's
	// socket (notify.go).
	ownFilter ownFilter

	watched     watched    // what the drift watch reports a link's change for (watch.go)
	stats       watchStats // of the drift watch
	eventBuffer int        // the route notifications' receive buffer; 0: eventBuffer (tests make it small)
	// routeSeen, if set (by tests, before the watch starts), is called
	// with the identity of each route notification once it is handled.
	routeSeen func(RouteKey)
}

var (
	_ reconciler.Target[*Route]      = (*Target)(nil)
	_ reconciler.BatchTarget[*Route] = (*Target)(nil)
)

// NewTarget checks cfg and returns a Target. It opens nothing: the netlink
// sockets are opened in cfg.NetNS at the first operation, whose error it is
// if that fails (a namespace that does not exist yet, say), to be retried.
// Errors: ErrInvalidConfig for a Protocol out of range or a NetNS that
// cannot name a namespace ("..").
func NewTarget(cfg TargetConfig) (*Target, error) {
	proto := cfg.Protocol
	if proto == 0 {
		proto = DefaultProtocol
	}
	if proto < minProtocol || proto > 255 {
		return nil, fmt.Errorf("%w: Protocol %d is out of range (%d to 255; 0 to %d belong to the kernel and to `ip route`)",
			ErrInvalidConfig, cfg.Protocol, minProtocol, minProtocol-1)
	}
	ns, err := netnsutil.Resolve(cfg.NetNS)
	if err != nil {
		return nil, fmt.Errorf("%w: NetNS: %w", ErrInvalidConfig, err)
	}
	return &Target{proto: proto, ns: ns, noWatch: cfg.DisableWatch}, nil
}

// connect opens the netlink sockets in the target's namespace, unless they
// are open. Errors: ErrTargetClosed, or the error of opening the namespace
// or a socket. t.mu is held.
func (t *Target) connect() error {
	if t.closed {
		return ErrTargetClosed
	}
	if t.h != nil {
		return nil
	}
	ns := netns.None()
	if t.ns != "" {
		var err error
		ns, err = netns.GetFromPath(string(t.ns))
		if err != nil {
			return fmt.Errorf("routes target: network namespace %s: %w", t.ns, err)
		}
		// The sockets keep the namespace; the handle to it can go.
		defer ns.Close()
	}
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("routes target: netlink socket in network namespace %q: %w", t.ns, err)
	}
	// Have the kernel filter route listings by table and protocol.
	// Kernels before 4.20 do not know the option; the library then
	// filters.
	_ = h.SetStrictCheck(true)
	p, err := newPipeline(ns)
	if err != nil {
		h.Close()
		return fmt.Errorf("routes target: netlink socket in network namespace %q: %w", t.ns, err)
	}
	t.h, t.p = h, p
	if port, err := p.sock.GetPid(); err == nil {
		t.ownFilter.setPort(port)
	}
	return nil
}

// Protocol returns the protocol number that marks the target's routes.
func (t *Target) Protocol() int { return t.proto }

// KernelMarksOwned reports true: the kernel keeps, with every route this
// target installs, the target's protocol number, and the target's Prune
// and Delete go by that mark alone (Prune lists the routes of its protocol
// in every table; a delete names the protocol, so the kernel refuses
// another's route). A program need not record what the target applied to
// find or remove it after a restart.
func (t *Target) KernelMarksOwned() bool { return true }

// Close closes the netlink sockets. Later operations fail with
// ErrTargetClosed. Closing twice is a no-op. It always returns nil.
func (t *Target) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	if t.h != nil {
		t.ownFilter.setPort(0)
		t.h.Close()
		t.p.close()
		t.h, t.p = nil, nil
	}
	return nil
}

// Update installs r, or replaces the target's route with r's identity if
// it differs from r, or does nothing if it is already as desired. Errors:
// a terminal error wrapping ErrInvalidRoute if r fails Validate;
// ErrForeignRoute if another protocol's route has r's identity;
// ErrDeviceNotFound; a kernel error (unix.Errno) with a hint; ctx's error;
// ErrTargetClosed.
func (t *Target) Update(ctx context.Context, txn statedb.ReadTxn, r *Route) error {
	batch := []reconciler.BatchEntry[*Route]{{Object: r}}
	t.UpdateBatch(ctx, txn, batch)
	return batch[0].Result
}

// Delete deletes the target's route with r's identity, if there is one: a
// route of another protocol with that identity is left alone, and a missing
// route is no error. Errors: a kernel error, ctx's error, ErrTargetClosed.
func (t *Target) Delete(ctx context.Context, txn statedb.ReadTxn, r *Route) error {
	batch := []reconciler.BatchEntry[*Route]{{Object: r}}
	t.DeleteBatch(ctx, txn, batch)
	return batch[0].Result
}

// Prune deletes every route of the target's protocol, in any table and
// either family, whose identity is not one of desired's. Routes of other
// protocols are never looked at. It tries every deletion and returns their
// errors joined, or the error of listing the routes, or ctx's error, or
// ErrTargetClosed.
func (t *Target) Prune(ctx context.Context, txn statedb.ReadTxn, desired iter.Seq2[*Route, statedb.Revision]) error {
	keep := map[RouteKey]struct{}{}
	for r := range desired {
		keep[r.Key()] = struct{}{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.connect(); err != nil {
		return err
	}
	t.watched.keep(keep)
	var stale []routeOp
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := t.stale(family, keep)
		if err != nil {
			return err
		}
		for _, kr := range routes {
			stale = append(stale, routeOp{kind: opDelete, route: kroute{key: kr.key}})
			t.watched.unexpect(kr.key)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	t.p.run(stale, t.proto)
	var errs []error
	for _, op := range stale {
		if op.err != nil && !isGone(op.err) {
			errs = append(errs, fmt.Errorf("pruning route %s: %w", op.route.key, op.err))
		}
	}
	return errors.Join(errs...)
}
