package routes

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// pipeline sends route requests to the kernel in chunks, many netlink
// messages per write, instead of one request and one wait per route as
// netlink.Handle does. The kernel handles the messages of a write in order
// and at once; only failures are answered (no NLM_F_ACK), except the
// chunk's last message, whose acknowledgement marks the end of the chunk.
// A round of 1000 new routes is thus a few system calls instead of 3000.
//
// The socket is one of the netlink library's, opened in the target's
// namespace; the messages are encoded by appendRouteOp.
type pipeline struct {
	sock *nl.NetlinkSocket
	seq  uint32
	buf  []byte
}

// chunkSize is the most messages per write. Every failure in a chunk is
// queued on the socket before the chunk's end is read, so the receive
// buffer must hold chunkSize error messages (with NETLINK_CAP_ACK, well
// under 1 KiB each including overhead).
const chunkSize = 256

// answerTimeout bounds the wait for the kernel's answers to a chunk.
const answerTimeout = 10 * time.Second

// newPipeline opens a rtnetlink socket in ns (or the current namespace if
// ns is not open) with extended error messages.
func newPipeline(ns netns.NsHandle) (*pipeline, error) {
	s, err := nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		return nil, err
	}
	fd := s.GetFd()
	// Best effort: error messages name the problem (extended ack), echo
	// only the header of the failed request (cap ack), and a chunk's
	// failures fit in the receive buffer (forced past rmem_max when
	// allowed).
	_ = s.SetExtAck(true)
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	// Listings filtered by the kernel (by table, protocol), where it can.
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_GET_STRICT_CHK, 1)
	if s.SetReceiveBufferSize(1<<20, true) != nil {
		_ = s.SetReceiveBufferSize(1<<20, false)
	}
	if err := s.SetReceiveTimeout(&unix.Timeval{Sec: int64(answerTimeout / time.Second)}); err != nil {
		s.Close()
		return nil, err
	}
	return &pipeline{sock: s}, nil
}

func (p *pipeline) close() { p.sock.Close() }

// opKind is what a routeOp asks of the kernel.
type opKind uint8

const (
	opAdd     opKind = iota // create, fail with EEXIST if the identity is taken
	opReplace               // create or replace
	opDelete                // delete the route of this identity and protocol
)

// routeOp is one request of a pipeline run and, after it, its outcome.
type routeOp struct {
	kind  opKind
	route kroute
	err   error
}

// kroute is a route as the target installs it, in the kernel's terms.
type kroute struct {
	key   RouteKey
	typ   uint8      // RTN_*
	via   netip.Addr // invalid: none
	oif   int        // 0: none
	scope uint8      // RT_SCOPE_*
}

// run sends ops in chunks and sets each op's err: nil, or the kernel's
// errno (wrapped with its message, if it gave one), or the error of the
// socket for every op of a chunk whose outcome is unknown.
func (p *pipeline) run(ops []routeOp, proto int) {
	for start := 0; start < len(ops); start += chunkSize {
		p.runChunk(ops[start:min(start+chunkSize, len(ops))], proto)
	}
}

func (p *pipeline) runChunk(ops []routeOp, proto int) {
	first := p.seq + 1
	p.buf = p.buf[:0]
	for i := range ops {
		ops[i].err = nil
		p.seq++
		p.buf = appendRouteOp(p.buf, &ops[i], proto, p.seq, i == len(ops)-1)
	}
	last := p.seq
	failAllOps := func(err error) {
		for i := range ops {
			if ops[i].err == nil {
				ops[i].err = err
			}
		}
	}
	if err := p.send(p.buf); err != nil {
		failAllOps(fmt.Errorf("sending to the kernel: %w", err))
		return
	}
	for {
		msgs, _, err := p.sock.Receive()
		if err != nil {
			// Unknown outcomes (ENOBUFS: answers were lost; EAGAIN: no
			// answer in time). The operations are idempotent: the
			// reconciler retries them.
			failAllOps(fmt.Errorf("reading the kernel's answers: %w", err))
			return
		}
		for _, m := range msgs {
			if m.Header.Type != unix.NLMSG_ERROR || len(m.Data) < 4 {
				continue
			}
			i := m.Header.Seq - first // wraps for stale answers
			if i >= uint32(len(ops)) {
				continue // an answer to an earlier, abandoned chunk
			}
			if errno := int32(binary.NativeEndian.Uint32(m.Data)); errno != 0 {
				ops[i].err = ackError(unix.Errno(-errno), m.Header.Flags, m.Data[4:])
			}
			if m.Header.Seq == last {
				return
			}
		}
	}
}

// send writes buf, a run of netlink messages, to the kernel.
func (p *pipeline) send(buf []byte) error {
	to := &unix.SockaddrNetlink{Family: unix.AF_NETLINK}
	for {
		err := unix.Sendto(p.sock.GetFd(), buf, 0, to)
		if err != unix.EINTR && err != unix.EAGAIN {
			return err
		}
	}
}

// appendRouteOp appends the netlink message of op, with sequence number
// seq, to b. The message is encoded here rather than with the library's
// request types, which allocate a dozen times per message: at 10k routes
// a round, that was a tenth of the time and most of the garbage.
func appendRouteOp(b []byte, op *routeOp, proto int, seq uint32, ack bool) []byte {
	r := &op.route
	msgType, flags := uint16(unix.RTM_NEWROUTE), uint16(unix.NLM_F_REQUEST)
	switch op.kind {
	case opAdd:
		flags |= unix.NLM_F_CREATE | unix.NLM_F_EXCL
	case opReplace:
		flags |= unix.NLM_F_CREATE | unix.NLM_F_REPLACE
	case opDelete:
		msgType = unix.RTM_DELROUTE
	}
	if ack {
		flags |= unix.NLM_F_ACK
	}
	a := r.key.Prefix.Addr()
	family := uint8(unix.AF_INET)
	if a.Is6() {
		family = unix.AF_INET6
	}
	scope, typ := r.scope, r.typ
	if op.kind == opDelete {
		// Match on identity and protocol alone: any scope, type, next hop
		// and device.
		scope, typ = unix.RT_SCOPE_NOWHERE, unix.RTN_UNSPEC
	}

	start := len(b)
	ne := binary.NativeEndian
	// struct nlmsghdr; the length is filled in at the end.
	b = ne.AppendUint32(b, 0)
	b = ne.AppendUint16(b, msgType)
	b = ne.AppendUint16(b, flags)
	b = ne.AppendUint32(b, seq)
	b = ne.AppendUint32(b, 0) // port id: the kernel fills it in
	// struct rtmsg. The table goes in RTA_TABLE, which holds all 32 bits.
	b = append(b, family, uint8(r.key.Prefix.Bits()), 0 /* src_len */, 0, /* tos */
		unix.RT_TABLE_UNSPEC, uint8(proto), scope, typ)
	b = ne.AppendUint32(b, 0) // rtm_flags

	b = appendAddrAttr(b, unix.RTA_DST, a)
	b = appendU32Attr(b, unix.RTA_TABLE, r.key.Table)
	if r.key.Metric != 0 {
		b = appendU32Attr(b, unix.RTA_PRIORITY, r.key.Metric)
	}
	if op.kind != opDelete {
		if r.via.IsValid() {
			b = appendAddrAttr(b, unix.RTA_GATEWAY, r.via)
		}
		if r.oif != 0 {
			b = appendU32Attr(b, unix.RTA_OIF, uint32(r.oif))
		}
	}
	ne.PutUint32(b[start:], uint32(len(b)-start))
	return b
}

// appendAddrAttr appends a route attribute holding a's 4 or 16 bytes.
func appendAddrAttr(b []byte, typ uint16, a netip.Addr) []byte {
	if a.Is4() {
		v := a.As4()
		return appendAttr(b, typ, v[:])
	}
	v := a.As16()
	return appendAttr(b, typ, v[:])
}

func appendU32Attr(b []byte, typ uint16, v uint32) []byte {
	var data [4]byte
	binary.NativeEndian.PutUint32(data[:], v)
	return appendAttr(b, typ, data[:])
}

// appendAttr appends a struct rtattr with data, padded to 4 bytes.
func appendAttr(b []byte, typ uint16, data []byte) []byte {
	b = binary.NativeEndian.AppendUint16(b, uint16(unix.SizeofRtAttr+len(data)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, data...)
	for len(b)%unix.NLMSG_ALIGNTO != 0 {
		b = append(b, 0)
	}
	return b
}

// ackError returns errno with the kernel's extended message, if the
// answer carries one: "network is unreachable: Nexthop has invalid
// gateway". errors.Is(err, errno) holds.
func ackError(errno unix.Errno, flags uint16, data []byte) error {
	if flags&unix.NLM_F_ACK_TLVS == 0 {
		return errno
	}
	// The echoed request: its header only when capped, all of it if not.
	if len(data) < unix.SizeofNlMsghdr {
		return errno
	}
	skip := unix.SizeofNlMsghdr
	if flags&unix.NLM_F_CAPPED == 0 {
		skip = int(binary.NativeEndian.Uint32(data))
	}
	if skip > len(data) {
		return errno
	}
	for tlvs := data[nlAlign(skip):]; len(tlvs) >= unix.SizeofNlAttr; {
		l := int(binary.NativeEndian.Uint16(tlvs))
		typ := binary.NativeEndian.Uint16(tlvs[2:])
		if l < unix.SizeofNlAttr || l > len(tlvs) {
			break
		}
		if typ == unix.NLMSGERR_ATTR_MSG {
			msg := string(bytes.TrimRight(tlvs[unix.SizeofNlAttr:l], "\x00"))
			if msg != "" {
				return fmt.Errorf("%w: %s", errno, msg)
			}
		}
		tlvs = tlvs[min(nlAlign(l), len(tlvs)):]
	}
	return errno
}

func nlAlign(n int) int { return (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1) }
