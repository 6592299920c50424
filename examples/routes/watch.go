package routes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/steadystate/steadystate/internal/shrink"
	"github.com/steadystate/steadystate/reconciler"
)

// The target as a reconciler.DriftTarget: it listens to the rtnetlink
// notifications of its namespace and reports the routes that may have
// changed behind its back, so that the reconciler checks and repairs them
// at once instead of at their next refresh.
//
//   - A route added, changed or deleted, of any protocol (a foreign route
//     may take a desired route's identity), is reported by its identity;
//     the reconciler drops identities that are not desired, and the routes
//     of the local table (255), which no Route may name, are skipped here,
//     as are the target's own writes: dropped in the kernel by the
//     socket's filter (notify.go), or, if one comes through, recognized
//     as a route of its protocol just as it wrote it.
//   - A link that appears, comes up, goes down, is renamed or goes away is
//     reported through the routes that name it (Dev) and the routes via a
//     next hop (the kernel picks their device): the kernel drops IPv4
//     routes of a link that goes down without a notification, and a route
//     that failed because its device was missing or down (in Error, on a
//     backoff) is retried at once when the link appears or comes up.
//   - A connected route (protocol kernel) that appears reports the routes
//     via a next hop: one that was unreachable may be reachable now.
//   - When the notifications overflow the socket (ENOBUFS), some were lost:
//     the watch subscribes again and reports every object (ChangedAll).
//   - When the namespace goes away (deleted, or replaced by a new one of
//     the same name), the watch closes the target's sockets, so that the
//     next operation opens them in the namespace of that name or fails
//     saying it is gone, reports every object (whose checks then fail,
//     each saying so, until the namespace is back), and fails: the
//     reconciler reports it (health Degraded) and watches again after its
//     retry backoff.
//
// The watch costs nothing while nothing changes: two sockets that sleep,
// and a stat of the namespace's file every NamespaceCheckInterval.

// NamespaceCheckInterval is how often the watch checks that the target's
// namespace is still there (one stat of its file).
const NamespaceCheckInterval = time.Second

// eventBuffer is the receive buffer of the notification sockets: room for
// the notifications of a burst of several thousand changes.
const eventBuffer = 4 << 20

var _ reconciler.DriftTarget[*Route] = (*Target)(nil)

// watched is what the target knows of the desired routes for its watch:
// the identities of the routes it was asked to apply or plan, by device
// and for those via a next hop, and the routes it wrote (or found as it
// would write them), whose notifications are its own. Guarded by its own
// mutex, not t.mu, so that reading notifications never waits for an
// operation.
type watched struct {
	mu        sync.Mutex
	dev       map[RouteKey]string              // the Dev of each route that names one
	byDev     map[string]map[RouteKey]struct{} // the inverse of dev
	via       map[RouteKey]struct{}            // routes with a next hop
	installed map[RouteKey]ownRoute            // the target's routes as it wrote them
	// peaks are the most entries each map (and each device's set in
	// byDev) held when last compacted (see compact).
	peaks struct {
		dev, via, installed int
		byDev               map[string]int
	}
}

// compact gives back the room a burst of routes left in the maps once
// most of them are gone (shrink.Map): 50,000 routes deleted leave the
// memory of what remains.
func (w *watched) compact() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.compactLocked()
}

func (w *watched) compactLocked() {
	w.dev = shrink.Map(w.dev, &w.peaks.dev)
	w.via = shrink.Map(w.via, &w.peaks.via)
	w.installed = shrink.Map(w.installed, &w.peaks.installed)
	if w.peaks.byDev == nil {
		w.peaks.byDev = map[string]int{}
	}
	for dev, set := range w.byDev {
		peak := w.peaks.byDev[dev]
		w.byDev[dev] = shrink.Map(set, &peak)
		w.peaks.byDev[dev] = peak
	}
	for dev := range w.peaks.byDev {
		if w.byDev[dev] == nil {
			delete(w.peaks.byDev, dev)
		}
	}
}

// ownRoute is what sameRoute compares of a route the target wrote,
// without its identity (the map's key): 32 bytes, not a kroute's 96, for
// each of a large table's routes.
type ownRoute struct {
	typ uint8
	oif int32
	via netip.Addr
}

// expecting makes room for n more routes that expect records (a large
// batch's), so that its map grows once, not step by step.
func (w *watched) expecting(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.installed == nil || n > len(w.installed) {
		grown := make(map[RouteKey]ownRoute, len(w.installed)+n)
		maps.Copy(grown, w.installed)
		w.installed = grown
	}
}

// expect records that the kernel has (or is about to have) kr, written by
// the target.
func (w *watched) expect(kr kroute) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.installed == nil {
		w.installed = map[RouteKey]ownRoute{}
	}
	w.installed[kr.key] = ownRoute{typ: kr.typ, oif: int32(kr.oif), via: kr.via}
}

// unexpect forgets what expect recorded for k.
func (w *watched) unexpect(k RouteKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.installed, k)
}

// own reports whether the kernel's route r (of the target's protocol) is
// what the target wrote: its notification is no drift.
func (w *watched) own(r kernelRoute) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	o, ok := w.installed[r.key]
	return ok && sameRoute(r, &kroute{key: r.key, typ: o.typ, via: o.via, oif: int(o.oif)})
}

// track records r (about to be applied or planned) for the watch.
func (w *watched) track(r *Route) {
	k := r.Key()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dev == nil || w.via == nil {
		w.dev, w.byDev, w.via = map[RouteKey]string{}, map[string]map[RouteKey]struct{}{}, map[RouteKey]struct{}{}
	}
	if old, ok := w.dev[k]; ok && old != r.Dev {
		w.untrackDevLocked(k, old)
	}
	if r.Dev != "" {
		w.dev[k] = r.Dev
		if w.byDev[r.Dev] == nil {
			w.byDev[r.Dev] = map[RouteKey]struct{}{}
		}
		w.byDev[r.Dev][k] = struct{}{}
	}
	if r.Via.IsValid() {
		w.via[k] = struct{}{}
	} else {
		delete(w.via, k)
	}
}

// untrack forgets k (deleted, or pruned as not desired).
func (w *watched) untrack(k RouteKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if dev, ok := w.dev[k]; ok {
		w.untrackDevLocked(k, dev)
	}
	delete(w.via, k)
	delete(w.installed, k)
}

func (w *watched) untrackDevLocked(k RouteKey, dev string) {
	delete(w.dev, k)
	if set := w.byDev[dev]; set != nil {
		delete(set, k)
		if len(set) == 0 {
			delete(w.byDev, dev)
		}
	}
}

// keep forgets every route whose identity is not in keep.
func (w *watched) keep(keep map[RouteKey]struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, dev := range w.dev {
		if _, ok := keep[k]; !ok {
			w.untrackDevLocked(k, dev)
		}
	}
	for k := range w.via {
		if _, ok := keep[k]; !ok {
			delete(w.via, k)
		}
	}
	for k := range w.installed {
		if _, ok := keep[k]; !ok {
			delete(w.installed, k)
		}
	}
	w.compactLocked()
}

// affected returns the routes that a change of the link named dev may
// affect (withDev), and the routes via a next hop.
func (w *watched) affected(dev string, withDev bool) []RouteKey {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []RouteKey
	if withDev {
		for k := range w.byDev[dev] {
			out = append(out, k)
		}
	}
	for k := range w.via {
		out = append(out, k)
	}
	return out
}

// WatchStats counts what the target's watch saw since the target was made.
type WatchStats struct {
	// RouteEvents and LinkEvents are the notifications read; Own how many
	// route notifications were of the target's own writes (not reported).
	RouteEvents, LinkEvents, Own uint64
	// Overflows is how many times notifications were lost (ENOBUFS) and
	// every object was reported.
	Overflows uint64
}

// watchStats are the counters of WatchStats.
type watchStats struct{ routes, links, own, overflows atomic.Uint64 }

// WatchStats returns the counters of the target's watch.
func (t *Target) WatchStats() WatchStats {
	return WatchStats{RouteEvents: t.stats.routes.Load(), LinkEvents: t.stats.links.Load(), Own: t.stats.own.Load(),
		Overflows: t.stats.overflows.Load()}
}

// WatchDrift implements reconciler.DriftTarget (see the top of this
// file), unless TargetConfig.DisableWatch: then it waits for ctx and
// reports nothing. It returns nil when ctx ends; an error when it cannot subscribe
// to the notifications in the target's namespace, when their socket fails
// other than by overflowing, or when the namespace goes away.
func (t *Target) WatchDrift(ctx context.Context, drift reconciler.Drift) error {
	if t.noWatch {
		<-ctx.Done()
		return nil
	}
	var id nsIdentity
	if t.ns != "" {
		var err error
		if id, err = identify(string(t.ns)); err != nil {
			return fmt.Errorf("routes target: network namespace %s: %w", t.ns, err)
		}
	}
	for {
		s, err := t.subscribe()
		if err != nil {
			return err
		}
		drift.ChangedAll() // what changed before is unknown
		err = t.watch(ctx, s, drift, id)
		s.close()
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, errOverflow):
			t.stats.overflows.Add(1)
			continue // subscribe again, and report everything
		case errors.Is(err, errNamespaceGone):
			// The routes are not in a namespace of that name any more:
			// have every object checked, which fails (and says why)
			// until the namespace is back.
			t.disconnect()
			drift.ChangedAll()
		}
		return err
	}
}

var (
	// errOverflow: notifications were lost (ENOBUFS).
	errOverflow = errors.New("notifications lost: the socket's buffer overflowed")
	// errNamespaceGone: the target's namespace was deleted or replaced.
	errNamespaceGone = errors.New("is gone")
)

// subscription is a watch's two notification sockets.
type subscription struct {
	routes chan routeEvent
	links  chan netlink.LinkUpdate
	done   chan struct{} // closing it closes the sockets
	mu     sync.Mutex
	err    error             // the latest error the library reported
	up     map[int]linkState // the links, by index
}

// linkState is what the watch knows of a link.
type linkState struct {
	name string
	up   bool
}

// report records an error of the library's reading goroutines. Most
// concern one message (one that did not decode) and reading goes on; the
// one that ends the reading (ENOBUFS, a failed socket) comes last, just
// before the channel closes.
func (s *subscription) report(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

// close closes the sockets and waits until the library's goroutines are
// done (they end by closing the channels).
func (s *subscription) close() {
	close(s.done)
	for range s.routes {
	}
	if s.links != nil {
		for range s.links {
		}
	}
}

// subscribe opens the route and link notification sockets in the
// target's namespace and lists its links.
func (t *Target) subscribe() (*subscription, error) {
	ns := netns.None()
	if t.ns != "" {
		var err error
		if ns, err = netns.GetFromPath(string(t.ns)); err != nil {
			return nil, fmt.Errorf("routes target: network namespace %s: %w", t.ns, err)
		}
		defer ns.Close()
	}
	s := &subscription{
		routes: make(chan routeEvent, 256),
		links:  make(chan netlink.LinkUpdate, 16),
		done:   make(chan struct{}),
		up:     map[int]linkState{},
	}
	buf := t.eventBuffer
	if buf == 0 {
		buf = eventBuffer
	}
	// The buffer is forced past rmem_max where allowed (CAP_NET_ADMIN).
	sock, err := subscribeRoutes(ns, buf)
	if err != nil {
		close(s.done)
		close(s.routes)
		return nil, fmt.Errorf("routes target: subscribing to route notifications in network namespace %q: %w", t.ns, err)
	}
	// The target's own writes are dropped in the kernel (notify.go). The
	// filter lets go of the socket before it is closed.
	t.ownFilter.attach(sock)
	go func() {
		<-s.done
		t.ownFilter.detach(sock)
		sock.Close()
	}()
	go readRoutes(sock, s.routes, s.report)
	err = netlink.LinkSubscribeWithOptions(s.links, s.done, netlink.LinkSubscribeOptions{
		Namespace: &ns, ErrorCallback: s.report,
	})
	if err != nil {
		s.links = nil
		s.close()
		return nil, fmt.Errorf("routes target: subscribing to link notifications in network namespace %q: %w", t.ns, err)
	}
	// The links as they are now; the notifications say what changes.
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		s.close()
		return nil, fmt.Errorf("routes target: netlink socket in network namespace %q: %w", t.ns, err)
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		s.close()
		return nil, fmt.Errorf("routes target: listing links in network namespace %q: %w", t.ns, err)
	}
	for _, l := range links {
		a := l.Attrs()
		s.up[a.Index] = linkState{name: a.Name, up: a.Flags&unix.IFF_UP != 0}
	}
	return s, nil
}

// watch reports what the notifications say until ctx ends (nil), the
// subscription fails (errOverflow, or its error), or the namespace goes
// away (errNamespaceGone).
func (t *Target) watch(ctx context.Context, s *subscription, drift reconciler.Drift, id nsIdentity) error {
	var check <-chan time.Time
	if t.ns != "" {
		tick := time.NewTicker(NamespaceCheckInterval)
		defer tick.Stop()
		check = tick.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case u, ok := <-s.routes:
			if !ok {
				return s.failure()
			}
			t.routeChanged(u, drift)
			t.stats.routes.Add(1)
		case u, ok := <-s.links:
			if !ok {
				return s.failure()
			}
			t.stats.links.Add(1)
			t.linkChanged(s, u, drift)
		case <-check:
			if now, err := identify(string(t.ns)); err != nil || now != id {
				return fmt.Errorf("routes target: network namespace %s %w (deleted, or replaced by another of that name)", t.ns, errNamespaceGone)
			}
		}
	}
}

// failure returns why the subscription ended: errOverflow for ENOBUFS.
func (s *subscription) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.err == nil:
		return errors.New("routes target: the notification socket closed")
	case strings.Contains(s.err.Error(), unix.ENOBUFS.Error()):
		return errOverflow
	}
	return fmt.Errorf("routes target: reading notifications: %w", s.err)
}

// routeChanged reports the identity of a route that was added, changed or
// deleted, and, for a new connected route, the routes via a next hop.
func (t *Target) routeChanged(u routeEvent, drift reconciler.Drift) {
	k := u.route.key
	if k.Table == unix.RT_TABLE_LOCAL {
		return // the kernel's own, and no Route's
	}
	if t.routeSeen != nil {
		defer t.routeSeen(k)
	}
	if !u.del && u.route.proto == t.proto && t.watched.own(u.route) {
		t.stats.own.Add(1) // the target's own write: no drift
		return
	}
	drift.Changed(k.Encode())
	if !u.del && u.route.proto == unix.RTPROT_KERNEL {
		for _, k := range t.watched.affected("", false) {
			drift.Changed(k.Encode())
		}
	}
}

// linkChanged reports the routes a link's change may affect: when it
// appears, goes away, is renamed, or goes up or down.
func (t *Target) linkChanged(s *subscription, u netlink.LinkUpdate, drift reconciler.Drift) {
	a := u.Attrs()
	if a == nil {
		return
	}
	now := linkState{name: a.Name, up: u.Flags&unix.IFF_UP != 0}
	old, known := s.up[a.Index]
	if u.Header.Type == unix.RTM_DELLINK {
		delete(s.up, a.Index)
	} else {
		s.up[a.Index] = now
		if known && old == now {
			return // another attribute: nothing a route depends on
		}
	}
	report := func(name string) {
		for _, k := range t.watched.affected(name, true) {
			drift.Changed(k.Encode())
		}
	}
	report(now.name)
	if known && old.name != now.name {
		report(old.name)
	}
}

// nsIdentity tells namespaces apart: the device and inode of their file.
type nsIdentity struct{ dev, ino uint64 }

func identify(path string) (nsIdentity, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nsIdentity{}, err
	}
	return nsIdentity{dev: st.Dev, ino: st.Ino}, nil
}

// disconnect closes the target's sockets: the next operation opens them
// again, in the namespace that then has the target's NetNS name.
func (t *Target) disconnect() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.h != nil {
		t.ownFilter.setPort(0)
		t.h.Close()
		t.p.close()
		t.h, t.p = nil, nil
	}
}
