package netnstest

import (
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	mdnetlink "github.com/mdlayher/netlink"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/steadystate/steadystate/examples/netnsutil"
)

// Writes records the changes made to a namespace's routes and to its
// nf_tables rulesets (iptables-nft's rules) while it watches: the
// kernel's route notifications and nf_tables notifications, which the
// kernel sends for every change it makes, whoever asked. Stop makes a
// marker change of each kind and waits for its notification, so every
// change made before Stop was called is in its answer: an exact check
// that a program wrote nothing, with no sleep.
type Writes struct {
	t      testing.TB
	ns     netnsutil.NS
	done   chan struct{}
	routes chan netlink.RouteUpdate
	nftMon *nftables.Monitor
	nft    chan *nftables.MonitorEvent
	nsFile *os.File
	conn   *nftables.Conn
	errMu  sync.Mutex
	err    error
}

// Marker changes: a route of a table and protocol no program of the tests
// uses, and an nf_tables table of its own name.
const (
	markerTable    = 4_242_424
	markerNFTTable = "netnstest_marker"
)

var markerPrefix = &net.IPNet{IP: net.IPv4(198, 18, 255, 255), Mask: net.CIDRMask(32, 32)}

// WatchWrites starts recording the route and nf_tables changes of ns. Call
// Stop for the result; a test that does not is stopped at its end.
func WatchWrites(t testing.TB, ns netnsutil.NS) *Writes {
	t.Helper()
	f, err := os.Open(string(ns))
	if err != nil {
		t.Fatal(err)
	}
	w := &Writes{t: t, ns: ns, done: make(chan struct{}), routes: make(chan netlink.RouteUpdate, 1024), nsFile: f}
	h := netns.NsHandle(f.Fd())
	err = netlink.RouteSubscribeWithOptions(w.routes, w.done, netlink.RouteSubscribeOptions{
		Namespace:              &h,
		ReceiveBufferSize:      8 << 20,
		ReceiveBufferForceSize: true,
		ErrorCallback:          w.fail,
	})
	if err != nil {
		f.Close()
		t.Fatalf("watching the routes of %s: %v", ns, err)
	}
	w.conn, err = nftables.New(nftables.WithNetNSFd(int(f.Fd())), nftables.WithSockOptions(forceReadBuffer(32<<20)))
	if err == nil {
		w.nftMon = nftables.NewMonitor(nftables.WithMonitorEventBuffer(1 << 16))
		w.nft, err = w.conn.AddMonitor(w.nftMon)
	}
	if err != nil {
		close(w.done)
		for range w.routes {
		}
		f.Close()
		t.Fatalf("watching nf_tables in %s: %v", ns, err)
	}
	t.Cleanup(func() { w.stop() })
	return w
}

func (w *Writes) fail(err error) {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

// Stop makes the marker changes, waits for their notifications (up to
// 30s), stops watching and returns the changes seen before them, one line
// each: "route add 10.0.0.0/24 table 254 proto 254", "nft newrule
// filter/STEADYSTATE-INPUT handle 12". A lost notification (a receive
// buffer overflow) fails the test: the answer would not be exact.
func (w *Writes) Stop() (routes, nft []string) {
	w.t.Helper()
	defer w.stop()
	marker := &netlink.Route{Dst: markerPrefix, Table: markerTable, Type: unix.RTN_BLACKHOLE, Protocol: unix.RTPROT_STATIC}
	h, err := netlink.NewHandleAt(netns.NsHandle(w.nsFile.Fd()))
	if err != nil {
		w.t.Fatal(err)
	}
	defer h.Close()
	if err := h.RouteAdd(marker); err != nil {
		w.t.Fatalf("adding the marker route: %v", err)
	}
	defer h.RouteDel(marker)
	deadline := time.After(30 * time.Second)
	for seen := false; !seen; {
		select {
		case u, ok := <-w.routes:
			if !ok {
				w.t.Fatalf("the route notifications of %s ended: %v", w.ns, w.err)
			}
			if u.Table == markerTable {
				seen = true
				continue
			}
			routes = append(routes, routeLine(u))
		case <-deadline:
			w.t.Fatalf("no notification of the marker route within 30s")
		}
	}
	table := w.conn.AddTable(&nftables.Table{Name: markerNFTTable, Family: nftables.TableFamilyIPv4})
	if err := w.conn.Flush(); err != nil {
		w.t.Fatalf("adding the marker nf_tables table: %v", err)
	}
	defer func() {
		w.conn.DelTable(table)
		_ = w.conn.Flush()
	}()
	for seen := false; !seen; {
		select {
		case ev, ok := <-w.nft:
			if !ok {
				w.t.Fatalf("the nf_tables notifications of %s ended", w.ns)
			}
			if ev.Error != nil {
				w.t.Fatalf("nf_tables notifications of %s: %v", w.ns, ev.Error)
			}
			if tb, ok := ev.Data.(*nftables.Table); ok && tb.Name == markerNFTTable {
				seen = true
				continue
			}
			nft = append(nft, nftLine(ev))
		case <-deadline:
			w.t.Fatalf("no notification of the marker nf_tables table within 30s")
		}
	}
	w.errMu.Lock()
	defer w.errMu.Unlock()
	if w.err != nil {
		w.t.Fatalf("route notifications of %s: %v", w.ns, w.err)
	}
	return routes, nft
}

// stop ends the watches (again: no effect).
func (w *Writes) stop() {
	select {
	case <-w.done:
		return
	default:
	}
	close(w.done)
	for range w.routes { // the subscription closes it once done
	}
	w.nftMon.Close()
	for range w.nft {
	}
	w.conn.CloseLasting()
	w.nsFile.Close()
}

// forceReadBuffer sets the receive buffer of the nf_tables notifications'
// socket to n bytes, past rmem_max (the tests run as root), so that a
// program that rewrites thousands of rules loses none of them.
func forceReadBuffer(n int) nftables.SockOption {
	return func(c *mdnetlink.Conn) error {
		raw, err := c.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		if err := raw.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n)
		}); err != nil {
			return err
		}
		if serr != nil {
			return c.SetReadBuffer(n)
		}
		return nil
	}
}

func routeLine(u netlink.RouteUpdate) string {
	op := "add"
	if u.Type == unix.RTM_DELROUTE {
		op = "del"
	}
	return fmt.Sprintf("route %s %s table %d proto %d", op, u.Dst, u.Table, u.Protocol)
}

func nftLine(ev *nftables.MonitorEvent) string {
	name := map[nftables.MonitorEventType]string{
		nftables.MonitorEventTypeNewTable: "newtable", nftables.MonitorEventTypeDelTable: "deltable",
		nftables.MonitorEventTypeNewChain: "newchain", nftables.MonitorEventTypeDelChain: "delchain",
		nftables.MonitorEventTypeNewRule: "newrule", nftables.MonitorEventTypeDelRule: "delrule",
	}[ev.Type]
	if name == "" {
		name = fmt.Sprintf("event %d", ev.Type)
	}
	switch d := ev.Data.(type) {
	case *nftables.Table:
		return "nft " + name + " " + d.Name
	case *nftables.Chain:
		return "nft " + name + " " + d.Table.Name + "/" + d.Name
	case *nftables.Rule:
		return fmt.Sprintf("nft %s %s/%s handle %d", name, d.Table.Name, d.Chain.Name, d.Handle)
	}
	return "nft " + name
}

// NFTRule is an nf_tables rule as NFTRules lists it.
type NFTRule struct {
	Table, Chain   string
	Handle         uint64
	Packets, Bytes uint64 // of its counter (iptables-nft gives every rule one)
	HasCounter     bool
}

// NFTRules lists every IPv4 nf_tables rule of ns, with its handle and
// counter, table by table and chain by chain in the kernel's order: a
// rule that was deleted and written again has a new handle and a counter
// back at zero.
func NFTRules(t testing.TB, ns netnsutil.NS) []NFTRule {
	t.Helper()
	f, err := os.Open(string(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	conn, err := nftables.New(nftables.WithNetNSFd(int(f.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	chains, err := conn.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
	if err != nil {
		t.Fatalf("listing the nf_tables chains of %s: %v", ns, err)
	}
	var out []NFTRule
	for _, c := range chains {
		rules, err := conn.GetRules(c.Table, c)
		if err != nil {
			t.Fatalf("listing the rules of %s/%s in %s: %v", c.Table.Name, c.Name, ns, err)
		}
		for _, r := range rules {
			nr := NFTRule{Table: c.Table.Name, Chain: c.Name, Handle: r.Handle}
			for _, e := range r.Exprs {
				if cnt, ok := e.(*expr.Counter); ok {
					nr.Packets, nr.Bytes, nr.HasCounter = cnt.Packets, cnt.Bytes, true
				}
			}
			out = append(out, nr)
		}
	}
	return out
}
