package routes

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Route notifications for the watch (watch.go), read from a socket of
// their own and decoded lean (as listings are, dump.go): identity,
// protocol, type, gateway, device. The target's own writes never reach
// it: a socket filter drops, in the kernel, every notification whose
// netlink header carries the port ID of the target's pipeline socket
// (the kernel puts the requester's there), so that a first apply of
// 50,000 routes costs the watch nothing. A notification the filter
// misses (while the watch's socket is being set up) is recognized as
// the target's own as before (watched.own).

// routeEvent is a route notification: added (or changed) or deleted.
type routeEvent struct {
	del   bool
	route kernelRoute
}

// everyRoute selects every route of a notification.
func everyRoute(RouteKey, int) bool { return true }

// subscribeRoutes opens a socket in ns subscribed to the IPv4 and IPv6
// route notifications, with a receive buffer of buf bytes (forced past
// rmem_max where allowed).
func subscribeRoutes(ns netns.NsHandle, buf int) (*nl.NetlinkSocket, error) {
	s, err := nl.SubscribeAt(ns, netns.None(), unix.NETLINK_ROUTE, unix.RTNLGRP_IPV4_ROUTE, unix.RTNLGRP_IPV6_ROUTE)
	if err != nil {
		return nil, err
	}
	if s.SetReceiveBufferSize(buf, true) != nil {
		if err := s.SetReceiveBufferSize(buf, false); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// readRoutes sends the route notifications of s to out until s fails or
// is closed; then it reports the error and closes out.
func readRoutes(s *nl.NetlinkSocket, out chan<- routeEvent, report func(error)) {
	defer close(out)
	for {
		msgs, from, err := s.Receive()
		if err != nil {
			report(fmt.Errorf("receive failed: %w", err))
			return
		}
		if from.Pid != nl.PidKernel {
			continue
		}
		for _, m := range msgs {
			if m.Header.Type != unix.RTM_NEWROUTE && m.Header.Type != unix.RTM_DELROUTE {
				continue
			}
			kr, ok := decodeRoute(m.Data, 0, 0, everyRoute)
			if !ok {
				continue // a TOS, a family or a prefix no Route has
			}
			out <- routeEvent{del: m.Header.Type == unix.RTM_DELROUTE, route: kr}
		}
	}
}

// ownFilter keeps the filter of the watch's socket naming the port ID of
// the target's pipeline socket.
type ownFilter struct {
	mu     sync.Mutex
	sock   *nl.NetlinkSocket // the watch's; nil while none
	port   uint32            // the pipeline's; 0 while none
	set    bool              // sock has a filter
	failed uint64            // filter updates that failed (counted, then ignored)
}

// attach makes s the watch's socket (nil: none) and filters it.
func (f *ownFilter) attach(s *nl.NetlinkSocket) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sock, f.set = s, false
	f.apply()
}

// detach forgets s, if it is the watch's socket (a later watch's may
// have taken its place).
func (f *ownFilter) detach(s *nl.NetlinkSocket) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sock == s {
		f.sock, f.set = nil, false
	}
}

// setPort names the pipeline socket's port ID (0: none).
func (f *ownFilter) setPort(port uint32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.port = port
	f.apply()
}

// failures returns how many filter updates failed.
func (f *ownFilter) failures() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

// apply sets the socket's filter. f.mu is held.
func (f *ownFilter) apply() {
	if f.sock == nil || f.port == 0 && !f.set {
		return
	}
	fd := f.sock.GetFd()
	var err error
	if f.port == 0 {
		err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DETACH_FILTER, 0)
		f.set = false
	} else {
		var raw []bpf.RawInstruction
		if raw, err = bpf.Assemble(ownPortProgram(f.port)); err == nil {
			prog := make([]unix.SockFilter, len(raw))
			for i, ins := range raw {
				prog[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
			}
			err = unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]})
			f.set = err == nil
		}
	}
	if err != nil {
		f.failed++
	}
}

// ownPortProgram drops every message whose header's port ID is port. A
// socket filter reads the packet in network byte order; the netlink
// header is in the host's.
func ownPortProgram(port uint32) []bpf.Instruction {
	wire := binary.BigEndian.Uint32(binary.NativeEndian.AppendUint32(nil, port))
	return []bpf.Instruction{
		bpf.LoadAbsolute{Off: 12, Size: 4}, // nlmsg_pid
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: wire, SkipTrue: 1},
		bpf.RetConstant{Val: 0xffffffff},
		bpf.RetConstant{Val: 0},
	}
}
