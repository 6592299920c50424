package routes

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Listing the kernel's routes, lean. The netlink library decodes every
// route of a listing in full (a dozen allocations each): at 10,000 routes
// a listing cost 18ms of CPU, and a refresh of a table, a listing per round
// of 100, almost two seconds. Here each route's identity and protocol are
// read in place, and only the routes the caller selects are decoded, into
// what the target compares (kernelRoute: type, gateway, device, number of
// next hops, protocol), with no allocation.

// selectRoute chooses the routes of a listing to decode: by identity and
// protocol.
type selectRoute func(k RouteKey, proto int) bool

// list lists the routes of family in table (0: every table) and of
// protocol proto (0: any), and returns those keep selects. The kernel
// filters by table and protocol where it can (strict checking); the rest
// is filtered here. A table that does not exist has no routes. Routes with
// a TOS other than 0 are left out: a Route never has one. A listing that
// the kernel interrupted because the routes changed meanwhile is tried
// again, up to maxDumpAttempts times. t.mu is held.
func (t *Target) list(family int, table uint32, proto int, keep selectRoute) ([]kernelRoute, error) {
	var routes []kernelRoute
	var err error
	t.listings.Add(1)
	for range maxDumpAttempts {
		routes, err = t.p.list(family, table, proto, keep)
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	if errors.Is(err, unix.ENOENT) {
		return nil, nil // a table the kernel does not have yet
	}
	return routes, err
}

// list sends one RTM_GETROUTE dump request and reads its answer.
func (p *pipeline) list(family int, table uint32, proto int, keep selectRoute) ([]kernelRoute, error) {
	var out []kernelRoute
	err := p.listEach(family, table, proto, keep, func(kr kernelRoute) { out = append(out, kr) })
	return out, err
}

// listEach is list, handing each route selected to each as it is read.
// An interrupted listing (netlink.ErrDumpInterrupted) may have handed
// some: the caller starts again from nothing.
func (p *pipeline) listEach(family int, table uint32, proto int, keep selectRoute, each func(kernelRoute)) error {
	p.seq++
	seq := p.seq
	b := make([]byte, 0, 64)
	ne := binary.NativeEndian
	b = ne.AppendUint32(b, 0)
	b = ne.AppendUint16(b, unix.RTM_GETROUTE)
	b = ne.AppendUint16(b, unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	b = ne.AppendUint32(b, seq)
	b = ne.AppendUint32(b, 0)
	b = append(b, uint8(family), 0, 0, 0, unix.RT_TABLE_UNSPEC, uint8(proto), 0, 0)
	b = ne.AppendUint32(b, 0)
	if table != 0 {
		b = appendU32Attr(b, unix.RTA_TABLE, table)
	}
	ne.PutUint32(b, uint32(len(b)))
	if err := p.send(b); err != nil {
		return fmt.Errorf("sending a route listing request: %w", err)
	}
	interrupted := false
	for {
		msgs, _, err := p.sock.Receive()
		if err != nil {
			return fmt.Errorf("reading a route listing: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Seq != seq {
				continue // an answer to an earlier, abandoned request
			}
			if m.Header.Flags&unix.NLM_F_DUMP_INTR != 0 {
				interrupted = true
			}
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				if interrupted {
					return netlink.ErrDumpInterrupted
				}
				return nil
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if errno := int32(ne.Uint32(m.Data)); errno != 0 {
						return unix.Errno(-errno)
					}
				}
				return nil
			case unix.RTM_NEWROUTE:
				if kr, ok := decodeRoute(m.Data, table, proto, keep); ok {
					each(kr)
				}
			}
		}
	}
}

// decodeRoute reads the identity and protocol of the route message data
// (a struct rtmsg and its attributes) and, if it is in table (0: any) and
// of protocol proto (0: any) and keep selects it, decodes it.
func decodeRoute(data []byte, table uint32, proto int, keep selectRoute) (kernelRoute, bool) {
	if len(data) < unix.SizeofRtMsg {
		return kernelRoute{}, false
	}
	family, dstLen, tos := data[0], int(data[1]), data[3]
	rtTable, rtProto, typ := uint32(data[4]), int(data[5]), data[7]
	if tos != 0 || (proto != 0 && rtProto != proto) {
		return kernelRoute{}, false
	}
	var dst, gw []byte
	var priority, oif uint32
	nexthops := 0
	ne := binary.NativeEndian
	for attrs := data[nlAlign(unix.SizeofRtMsg):]; len(attrs) >= unix.SizeofRtAttr; {
		l := int(ne.Uint16(attrs))
		if l < unix.SizeofRtAttr || l > len(attrs) {
			break
		}
		v := attrs[unix.SizeofRtAttr:l]
		switch ne.Uint16(attrs[2:]) {
		case unix.RTA_DST:
			dst = v
		case unix.RTA_TABLE:
			if len(v) == 4 {
				rtTable = ne.Uint32(v)
			}
		case unix.RTA_PRIORITY:
			if len(v) == 4 {
				priority = ne.Uint32(v)
			}
		case unix.RTA_GATEWAY:
			gw = v
		case unix.RTA_OIF:
			if len(v) == 4 {
				oif = ne.Uint32(v)
			}
		case unix.RTA_MULTIPATH:
			for nh := v; len(nh) >= unix.SizeofRtNexthop; nexthops++ {
				n := int(ne.Uint16(nh))
				if n < unix.SizeofRtNexthop || n > len(nh) {
					break
				}
				nh = nh[min(nlAlign(n), len(nh)):]
			}
		}
		attrs = attrs[min(nlAlign(l), len(attrs)):]
	}
	if table != 0 && rtTable != table {
		return kernelRoute{}, false
	}
	var a netip.Addr
	switch {
	case family == unix.AF_INET && (dst == nil || len(dst) == 4):
		a = netip.IPv4Unspecified()
	case family == unix.AF_INET6 && (dst == nil || len(dst) == 16):
		a = netip.IPv6Unspecified()
	default:
		return kernelRoute{}, false
	}
	if dst != nil {
		a, _ = netip.AddrFromSlice(dst)
	}
	p := netip.PrefixFrom(a, dstLen)
	if !p.IsValid() {
		return kernelRoute{}, false
	}
	k := RouteKey{Table: rtTable, Prefix: p.Masked(), Metric: priority}
	if !keep(k, rtProto) {
		return kernelRoute{}, false
	}
	kr := kernelRoute{key: k, proto: rtProto, typ: typ, oif: int(oif), nexthops: nexthops}
	if gw != nil {
		g, _ := netip.AddrFromSlice(gw)
		kr.gw = g.Unmap()
	}
	return kr, true
}
