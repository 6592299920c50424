package routes

import (
	"fmt"
	"testing"

	"github.com/vishvananda/netlink"
)

// The lean listing (dump.go) agrees with the netlink library's, route by
// route, on what the target compares: identity, protocol, type, gateway,
// device, number of next hops; routes with a TOS are left out; the
// kernel's filters by table and protocol hold.
func TestListAgreesWithLibrary(t *testing.T) {
	w := newWorldWith(t, TargetConfig{DisableWatch: true})
	applyDesired(t, w)
	w.ip("link", "add", "v2", "type", "veth", "peer", "name", "v3")
	w.ip("addr", "add", "192.0.2.129/25", "dev", "v2")
	w.ip("link", "set", "v2", "up")
	w.ip("link", "set", "v3", "up")
	w.ip("route", "add", "10.60.0.0/16", "nexthop", "via", "192.0.2.2", "dev", "v0", "nexthop", "via", "192.0.2.130", "dev", "v2")
	w.ip("route", "add", "10.61.0.0/16", "tos", "0x10", "dev", "lo")
	w.ip("route", "add", "blackhole", "10.62.0.0/16", "table", "70000", "proto", "bird", "metric", "9")
	w.ip("-6", "route", "add", "unreachable", "2001:db8:70::/48", "table", "70000")

	ts := w.target
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if err := ts.connect(); err != nil {
		t.Fatal(err)
	}
	all := func(RouteKey, int) bool { return true }
	for _, tc := range []struct {
		family int
		table  uint32
		proto  int
	}{
		{netlink.FAMILY_V4, 0, 0}, {netlink.FAMILY_V6, 0, 0},
		{netlink.FAMILY_V4, 254, 0}, {netlink.FAMILY_V4, 70000, 0}, {netlink.FAMILY_V6, 70000, 0},
		{netlink.FAMILY_V4, 0, DefaultProtocol}, {netlink.FAMILY_V6, 0, DefaultProtocol},
		{netlink.FAMILY_V4, 12345, 0}, // no such table
	} {
		t.Run(fmt.Sprintf("family=%d/table=%d/proto=%d", tc.family, tc.table, tc.proto), func(t *testing.T) {
			got, err := ts.list(tc.family, tc.table, tc.proto, all)
			if err != nil {
				t.Fatal(err)
			}
			want := map[RouteKey]netlink.Route{}
			filter, mask := &netlink.Route{Table: int(tc.table), Protocol: netlink.RouteProtocol(tc.proto)}, uint64(0)
			if tc.table != 0 {
				mask |= netlink.RT_FILTER_TABLE
			} else {
				filter.Table = 0
				mask |= netlink.RT_FILTER_TABLE // with table 0: every table (RT_TABLE_UNSPEC)
			}
			if tc.proto != 0 {
				mask |= netlink.RT_FILTER_PROTOCOL
			}
			lib, err := ts.h.RouteListFiltered(tc.family, filter, mask)
			if err != nil && tc.table != 12345 {
				t.Fatal(err)
			}
			for _, nr := range lib {
				if tc.table != 0 && nr.Table != int(tc.table) || tc.proto != 0 && int(nr.Protocol) != tc.proto {
					continue
				}
				if k, ok := kernelKey(nr); ok {
					want[k] = nr
				}
			}
			// A key may be listed more than once (a link-local or
			// multicast route per device); the library's are in a map.
			keys := map[RouteKey]int{}
			for _, kr := range got {
				keys[kr.key]++
			}
			if len(keys) != len(want) {
				t.Fatalf("%d routes listed, the library lists %d", len(keys), len(want))
			}
			for _, kr := range got {
				nr, ok := want[kr.key]
				if !ok {
					t.Fatalf("%v listed, not by the library", kr.key)
				}
				if keys[kr.key] > 1 {
					continue // of its several routes, the library kept one
				}
				if lib := kernelRouteOf(nr, kr.key); kr != lib || int(kr.key.Table) != nr.Table || int(kr.key.Metric) != nr.Priority {
					t.Errorf("%v: listed %+v, the library %+v (%+v)", kr.key, kr, lib, nr)
				}
			}
		})
	}
}
