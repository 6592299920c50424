package iptables

import (
	"encoding/binary"
	"slices"
	"sync"

	"github.com/mdlayher/netlink"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The watch's socket filter: while the target's own iptables-restore
// runs, the kernel drops that process's nf_tables notifications before
// they reach the watch's socket, so that they are neither copied nor
// decoded (a first apply of 10,000 rules is 10,000 rule notifications,
// each decoded expression by expression). Only the generation message
// that ends the transaction passes, and the watch counts the generation
// as its own by the process ID in it, as without the filter.
//
// A notification's netlink header carries the port ID of the socket that
// made the change, which the kernel sets to the process ID for a
// process's first netlink socket (iptables-restore has one). A restore
// whose socket has another port ID is not filtered: its notifications
// are decoded and dropped after, as before. The filter names only
// restores that run: it is set, naming the new process, before the
// restore reads its input, and the process is taken out once it exited,
// when every notification of its changes was delivered (or dropped), so
// that a later socket given that port ID is never filtered.

// ownFilter keeps the watch's socket filter naming the target's running
// restores.
type ownFilter struct {
	mu      sync.Mutex
	conn    *netlink.Conn // the watch's socket; nil while none
	running []uint32      // process IDs of the running restores
	set     bool          // conn has a filter
	failed  uint64        // filter updates that failed (counted, then ignored)
}

// maxFiltered is the most restores the filter names at once; more run
// only with concurrent targets on one namespace, whose extra restores
// are then decoded and dropped as without the filter.
const maxFiltered = 16

// attach makes conn the watch's socket and filters it; nil detaches.
func (f *ownFilter) attach(conn *netlink.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.conn, f.set = conn, false
	f.apply()
}

// failures returns how many filter updates failed.
func (f *ownFilter) failures() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

// started adds a restore that is about to read its input.
func (f *ownFilter) started(pid int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running = append(f.running, uint32(pid))
	f.apply()
}

// exited removes a restore that exited.
func (f *ownFilter) exited(pid int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running = slices.DeleteFunc(f.running, func(p uint32) bool { return p == uint32(pid) })
	f.apply()
}

// apply sets the socket's filter for the running restores (none: no
// filter). f.mu is held.
func (f *ownFilter) apply() {
	if f.conn == nil || len(f.running) == 0 && !f.set {
		return
	}
	var err error
	if len(f.running) == 0 {
		err = f.conn.RemoveBPF()
		f.set = false
	} else {
		var prog []bpf.RawInstruction
		if prog, err = bpf.Assemble(ownFilterProgram(f.running[:min(len(f.running), maxFiltered)])); err == nil {
			err = f.conn.SetBPF(prog)
			f.set = err == nil
		}
	}
	if err != nil {
		f.failed++
	}
}

// ownFilterProgram drops every message from one of pids' port IDs but
// the generation message. A socket filter reads the packet in network
// byte order; the netlink header is in the host's, hence wire().
func ownFilterProgram(pids []uint32) []bpf.Instruction {
	accept := bpf.RetConstant{Val: 0xffffffff}
	drop := bpf.RetConstant{Val: 0}
	n := uint8(len(pids))
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 2}, // nlmsg_type
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: wire16(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWGEN), SkipTrue: n + 1},
		bpf.LoadAbsolute{Off: 12, Size: 4}, // nlmsg_pid
	}
	for i, pid := range pids {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: wire32(pid), SkipTrue: n - uint8(i)})
	}
	return append(prog, accept, drop)
}

// wire16 and wire32 are v in host byte order as a socket filter loads it.
func wire16(v uint16) uint32 {
	return uint32(binary.BigEndian.Uint16(binary.NativeEndian.AppendUint16(nil, v)))
}
func wire32(v uint32) uint32 {
	return binary.BigEndian.Uint32(binary.NativeEndian.AppendUint32(nil, v))
}
