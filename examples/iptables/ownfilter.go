package iptables

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"

	"github.com/mdlayher/netlink"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The watch and the target's own restores. A restore of one table (one
// COMMIT) runs with the watch's socket out of nf_tables' notification
// group: with no listener the kernel builds no notification at all (for
// 5,000 rules that was 15% of the restore's time, spent in the kernel).
// What the socket does not hear is accounted for by the ruleset's
// generation (nfgen.go): the restore's one transaction moves it by one
// when it succeeds and not at all when it fails, so a count of more than
// that means that another program changed something meanwhile, which is
// then unknown, and every object is reported (as after a lost
// notification). The window opens in this order:
//
//  1. the generation is read (g0);
//  2. an empty batch waits for a transaction being committed: one that
//     moved the generation before step 1 sends its notifications under
//     the commit mutex, so they are heard before the socket leaves;
//  3. the socket leaves the group.
//
// It closes with the socket rejoining the group, then the generation
// read again. A change committed between the two reads is counted, and
// one heard as well only makes the count say "unsure"; none can be
// neither heard nor counted. The generation is the namespace's, of every
// family: two targets on one namespace (iptables and ip6tables) make
// each other's windows unsure when their restores overlap, and while the
// other's socket listens the kernel builds the notifications anyway.
//
// A restore of several tables (one generation each, or fewer) runs with
// the socket in the group, filtered instead: the kernel drops that
// process's notifications before they reach the watch's socket, so that
// they are neither copied nor decoded. Only the generation message that
// ends the transaction passes, and the watch counts the generation as its
// own by the process ID in it. The same filter is the fallback when the
// generation cannot be read or the socket cannot leave.
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
	w       watchHooks    // of the watch that conn is
	running []uint32      // process IDs of the running restores
	set     bool          // conn has a filter
	failed  uint64        // filter updates that failed (counted, then ignored)
	stats   *watchStats   // the target's, for the quiet windows
	// closed, if set (by tests), is told the generations of every quiet
	// window read at both ends.
	closed func(from, to uint32)
}

// watchHooks is what the watch gives the filter with its socket.
type watchHooks struct {
	gens *genConn // reads the namespace's generation; nil: no quiet windows
	// lost reports every object: a quiet window may have hidden another
	// program's change.
	lost func()
	// broken ends the watch (it subscribes again): its socket could not
	// rejoin the group.
	broken func(error)
}

// quiet is a restore's window out of the group: the socket that left,
// and the generation before it did.
type quiet struct {
	conn *netlink.Conn
	gen  uint32
}

// maxFiltered is the most restores the filter names at once; more run
// only with concurrent targets on one namespace, whose extra restores
// are then decoded and dropped as without the filter.
const maxFiltered = 16

// attach makes conn the watch's socket and filters it; nil detaches.
func (f *ownFilter) attach(conn *netlink.Conn, w watchHooks) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.conn, f.set, f.w = conn, false, w
	f.apply()
}

// failures returns how many filter updates failed.
func (f *ownFilter) failures() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

// started adds a restore that is about to read its input, of tables
// tables. The socket leaves the group for a restore of one table that
// runs alone, and the window is returned for exited; else nil.
func (f *ownFilter) started(pid int, tables int) *quiet {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running = append(f.running, uint32(pid))
	f.apply()
	if tables != 1 || len(f.running) != 1 || f.conn == nil || f.w.gens == nil {
		return nil
	}
	gen, err := f.w.gens.generation()
	if err == nil {
		err = f.w.gens.barrier()
	}
	if err != nil {
		// This watch's windows are off: a barrier left unanswered may
		// answer the next request.
		f.w.gens = nil
		return nil // heard, and filtered
	}
	if f.conn.LeaveGroup(unix.NFNLGRP_NFTABLES) != nil {
		return nil
	}
	return &quiet{conn: f.conn, gen: gen}
}

// exited removes a restore that exited; committed says it succeeded. A
// quiet window ends: the socket rejoins the group, and every object is
// reported unless the generation says nothing else happened meanwhile.
func (f *ownFilter) exited(pid int, q *quiet, committed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running = slices.DeleteFunc(f.running, func(p uint32) bool { return p == uint32(pid) })
	f.apply()
	if q == nil || q.conn != f.conn {
		return // the socket was replaced or closed: the new one reported everything
	}
	// The watch runs while its socket is f.conn: a report made now is
	// not taken for the recovery of a failure that ends it after.
	f.stats.quiet.Add(1)
	if err := f.conn.JoinGroup(unix.NFNLGRP_NFTABLES); err != nil {
		f.stats.unsure.Add(1)
		f.w.broken(fmt.Errorf("iptables target: the watch's socket rejoining nf_tables' group: %w", err))
		return
	}
	gen, err := f.w.gens.generation()
	if err != nil {
		f.w.gens = nil // this watch's windows are off
	} else if f.closed != nil {
		f.closed(q.gen, gen)
	}
	if err != nil || !quietAlone(gen-q.gen, committed) {
		f.stats.unsure.Add(1)
		f.w.lost()
	}
}

// quietAlone reports whether a quiet window whose generation moved by
// moved held only the restore's own transaction: one if it committed,
// none if it failed (it changed nothing). A restore of the target's that
// succeeds always changes something, so its transaction is never empty
// and a second generation is another program's: the input of a restore
// always has an -A, -I, -D or -X line (TestRestoreInputChanges), and
// each of those changes something or fails the restore. (A flush of an
// empty chain, or a declaration of a chain that exists, changes nothing:
// the target writes a flush only before -X or -A lines, and declares
// only chains iptables-save did not show.)
func quietAlone(moved uint32, committed bool) bool {
	return moved == 0 || moved == 1 && committed
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
