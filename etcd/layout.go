// Package etcd takes a fleet's desired state from etcd and gives etcd each
// node's status back: the source of a reflector (package reflector), the
// writer of desired state (Apply, ApplyTables), progressive rollouts gated
// by every node's answer (StartRollout), a status publisher kept alive by
// a lease, and the fleet view computed from the nodes' statuses and
// records.
//
// It is a module of its own, so that the library's go.mod stays free of
// gRPC and the etcd client.
//
// # Key layout
//
// Every key lives under a prefix (default DefaultPrefix). Desired objects
// are kept per table and scope, where the scope is "all" (every node) or
// "node/NAME" (one node), in generations:
//
//	PREFIX/layout                               the layout version ("3", LayoutVersion)
//	PREFIX/desired/TABLE/SCOPE/current          the generation in force ("g000000000042")
//	PREFIX/desired/TABLE/SCOPE/next             the last generation number taken
//	PREFIX/desired/TABLE/SCOPE/gen/GEN/NAME     an object of that generation (its value: the object)
//	PREFIX/desired/TABLE/all/pin/NODE           the fleet-wide generation in force for NODE during a rollout
//	PREFIX/desired/TABLE/all/delta/DELTA/put/NAME  an object a delta puts over the generation in force
//	PREFIX/desired/TABLE/all/delta/DELTA/del/NAME  an object a delta removes from it (empty value)
//	PREFIX/applies/SCOPE                        the mark of the scope's last apply (a value of its own)
//	PREFIX/status/NODE                          a node's status (JSON NodeStatus), under the node's lease
//	PREFIX/nodes/NODE                           a node's record (JSON NodeRecord), no lease
//	PREFIX/objects/NODE/TABLE/NAME              an object's status on a node (optional), under the same lease
//	PREFIX/rollout/active                       the rollout under way (JSON Rollout); applies are refused while it exists
//	PREFIX/rollout/driver                       the rollout's driver (JSON RolloutDriverInfo), under the driver's lease
//	PREFIX/rollout/next                         the last rollout number taken
//	PREFIX/rollout/history/ID                   a finished rollout (JSON Rollout), the last RolloutHistoryKept
//
// A node's fleet-wide generation of a table is its pin when it has one,
// else the scope's current one: a rollout moves nodes to a new state by
// pinning them to its new generations (see Rollouts). A pin may also name
// a delta ("d000000000043"): the objects it puts and removes over the
// current generation, which a rollout of a small change writes instead of
// a whole generation, so that a node switches by reading the change, not
// every object.
//
// The layout version is written by the first write of an apply (in the
// same transaction) if absent. A program that finds a version it does not
// know refuses to read or write (ErrUnknownLayout; see CheckLayout); an
// absent key is read as this layout. Version 1 (before the key existed:
// no node records) and version 2 (no pins, no rollouts) read the same as
// version 3 without them; an apply keeps the version it found, and the
// start of a rollout writes 3, so that a program that knows version 2
// only, which would not follow the pins, refuses the prefix from then on.
//
// # Applies
//
// Apply (one table) and ApplyTables (several, at once) make a change that
// fits in one transaction in place: the changed objects and the rewritten
// current pointers in one transaction. A larger one is staged as new
// generations, then the current pointers flip in one transaction and the
// old generations are deleted: etcd limits a transaction to 128
// operations, so a desired state of any size is written in several, yet a
// reader sees the old or the new state whole, never a mix. Where a
// fleet-wide and a node's own object share a name, the node's wins.
//
// Concurrent applies never leave a state none of them wrote: the write
// that puts an apply in force is guarded by the current keys of every
// table it names, as it read them (a key not there yet included), so it
// fails with ErrConflict if another apply wrote any of them meanwhile.
//
// # Rollouts
//
// StartRollout puts a new fleet-wide desired state in force step by step:
// the live nodes at the start, canaries first and then by name, are taken
// in cohorts (a step of p% reaches ceil(p × nodes) in all), and each step
// waits for every node of its cohort to answer: an ACK (its status says it
// applied its desired state, NodeStatus.Applied of its DesiredRevision) or
// a NACK (it received that state and reports objects in Error, Rejected or
// DeleteFailing, with the errors). More NACKing nodes over the rollout
// than it tolerates, or a node of the cohort without an answer when the
// step timeout passes, halts it and rolls it back. Its invariants:
//
//   - One rollout at a time per prefix: the transaction that starts one
//     creates Layout.RolloutActive only if it is absent, so of concurrent
//     starts exactly one wins. While the key exists nothing changes the
//     desired state but the rollout: ApplyTables refuses
//     (ErrRolloutActive), and the generations in force before it stay as
//     they were, the previous state to roll back to.
//   - A node switches whole: the rollout stages its new generations
//     without putting them in force, and a step pins each node of its
//     cohort (Layout.Pin) to the new generation of every changed table in
//     one transaction (with the rollout's state: what it records is what
//     etcd holds). The node's one watch reads its pins, so the node moves
//     from the old state to the new in one commit of its tables.
//   - Nodes outside the reached cohorts never see the new state: only
//     reached nodes have pins; the current keys keep the previous state
//     until the last step passed, so a node that joins mid-rollout reads
//     it (and gets the new state when the rollout completes).
//   - Finishing is one transaction for the whole fleet: completing puts
//     the new generations in force and removes the pins; rolling back
//     removes the pins and rewrites the current keys as they were, so that
//     every node's DesiredRevision moves past its pin; either way the
//     rollout goes to the history (the last RolloutHistoryKept are kept).
//   - An answer is never ahead of the truth: a lost, stopped or silent node
//     has not answered, whatever its last status said, and is never an
//     ACK; a NACK, once seen, stays counted for the rollout.
//   - Only the driver writes: the driver holds a lease (RolloutLeaseTTL)
//     under which it keeps Layout.RolloutDriver, and every write of the
//     driver is guarded by that lease and by the rollout's state as it last
//     wrote it. A driver that dies leaves the rollout paused once its lease
//     expires; ResumeRollout continues from the step reached (the step runs
//     again: switched nodes stay switched, NACKs stay counted); AbortRollout
//     rolls back with or without a live driver, which then fails with
//     ErrRolloutLost and writes nothing more.
//   - A rollout state that does not parse is never acted on: RolloutStatus
//     and ResumeRollout name its key and error (ErrRolloutUnreadable);
//     AbortRollout removes the pins it finds and nothing else.
//
// # Nodes: live, lost, left
//
// A node is live while its agent keeps its lease: its status key exists.
// With every status write, in the same transaction, the publisher writes
// the node's record (no lease), and writes it again at least every
// PublisherConfig.SeenInterval (DefaultSeenInterval, 1 minute) while the
// status does not change, so that its LastSeen stays at most that old.
// When the lease expires (a crash, a partition longer than the TTL), the
// status goes and the record stays: the node is lost, listed with its
// last status and when it was last seen, until its name runs again (the
// record never blocks a claim) or Forget removes the record (refused
// while the node is live). A clean stop (Publisher.Stop) deletes status and record in one
// transaction: a node that left is not listed. Keys under the status and
// record prefixes that are not a node's (malformed JSON, a name with '/')
// are named in View.Warnings and skipped; they never hide other nodes.
//
// # Revisions
//
// Every Apply that changes a scope rewrites its current key, and every
// write of a rollout that changes what a node reads writes its pins or
// the current keys, so DesiredRevision (the latest ModRevision of a node's
// current keys and pins) is the revision of the last change to a node's
// desired state. A node's Source
// watches all of its tables in one etcd watch and sends a
// reflector.Progress after each watch response that changed the node's
// desired state (etcd delivers each revision whole, in one response), so
// the node's one reflector (a reflector.Multi) commits the change to all
// its tables at once and its Revision reaches the change's revision at
// that commit. A node reports that revision in NodeStatus.Revision; it has
// received its desired state when the revision is at or past
// DesiredRevision (NodeStatus.Received), and applied it when besides every
// object is Done (NodeStatus.Applied). None of this waits for etcd's
// progress notifications, so it holds on every etcd version the client
// speaks to (tested on Debian's 3.4.23 and on 3.7.3; 3.5 and 3.6 deliver
// watch responses the same way).
package etcd

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// DefaultPrefix is the default key prefix.
const DefaultPrefix = "/steadystate/v1"

// ScopeAll is the scope of the objects meant for every node.
const ScopeAll = "all"

// NodeScope returns the scope of the objects meant for node alone.
func NodeScope(node string) string { return "node/" + node }

// Layout names the keys under a prefix.
type Layout struct {
	Prefix string // without a trailing slash; "" means DefaultPrefix
}

func (l Layout) prefix() string {
	if l.Prefix == "" {
		return DefaultPrefix
	}
	return strings.TrimSuffix(l.Prefix, "/")
}

// Desired returns the prefix of every table's desired objects:
// PREFIX/desired/.
func (l Layout) Desired() string { return l.prefix() + "/desired/" }

// Table returns the key prefix of a table's desired objects, every scope:
// PREFIX/desired/TABLE/.
func (l Layout) Table(table string) string {
	return fmt.Sprintf("%s/desired/%s/", l.prefix(), table)
}

// Scope returns the key prefix of a table's scope: PREFIX/desired/TABLE/SCOPE/.
func (l Layout) Scope(table, scope string) string {
	return fmt.Sprintf("%s/desired/%s/%s/", l.prefix(), table, scope)
}

// Current returns the key of the generation in force of a table's scope.
func (l Layout) Current(table, scope string) string { return l.Scope(table, scope) + "current" }

// Generation returns the key prefix of a generation's objects.
func (l Layout) Generation(table, scope, gen string) string {
	return l.Scope(table, scope) + "gen/" + gen + "/"
}

// Pin returns the key of node's pin of table: the fleet-wide generation in
// force for node while a rollout reached it, PREFIX/desired/TABLE/all/pin/NODE.
func (l Layout) Pin(table, node string) string { return l.PinPrefix(table) + node }

// PinPrefix returns the prefix of every node's pin of table.
func (l Layout) PinPrefix(table string) string { return l.Scope(table, ScopeAll) + "pin/" }

// RolloutPrefix returns the prefix of a rollout's keys: the active one,
// its driver, its counter and the history.
func (l Layout) RolloutPrefix() string { return l.prefix() + "/rollout/" }

// RolloutActive returns the key of the rollout under way: PREFIX/rollout/active.
func (l Layout) RolloutActive() string { return l.prefix() + "/rollout/active" }

// RolloutDriver returns the key of the rollout's driver, kept under the
// driver's lease: PREFIX/rollout/driver.
func (l Layout) RolloutDriver() string { return l.prefix() + "/rollout/driver" }

// RolloutCounter returns the key of the last rollout number taken.
func (l Layout) RolloutCounter() string { return l.prefix() + "/rollout/next" }

// RolloutHistory returns the prefix of the finished rollouts:
// PREFIX/rollout/history/.
func (l Layout) RolloutHistory() string { return l.prefix() + "/rollout/history/" }

// Status returns the key of a node's status.
func (l Layout) Status(node string) string { return l.StatusPrefix() + node }

// ObjectStatus returns the key of one object's status on node (kept only
// with PublisherConfig.ObjectStatuses):
// PREFIX/objects/NODE/TABLE/NAME.
func (l Layout) ObjectStatus(node, table, name string) string {
	return l.ObjectStatusPrefix(node) + table + "/" + name
}

// ObjectStatusPrefix returns the prefix of node's object status keys.
func (l Layout) ObjectStatusPrefix(node string) string { return l.prefix() + "/objects/" + node + "/" }

// ApplyMark returns the key an apply writes with its change of scope, a
// value of its own: after a lost answer it tells whether the change was
// made. PREFIX/applies/SCOPE.
func (l Layout) ApplyMark(scope string) string { return l.prefix() + "/applies/" + scope }

// StatusPrefix returns the prefix of the nodes' status keys.
func (l Layout) StatusPrefix() string { return l.prefix() + "/status/" }

// Record returns the key of a node's record: PREFIX/nodes/NODE.
func (l Layout) Record(node string) string { return l.RecordPrefix() + node }

// RecordPrefix returns the prefix of the nodes' records.
func (l Layout) RecordPrefix() string { return l.prefix() + "/nodes/" }

// VersionKey returns the key of the layout version: PREFIX/layout.
func (l Layout) VersionKey() string { return l.prefix() + "/layout" }

// Root returns the prefix every key of the layout starts with: PREFIX/.
func (l Layout) Root() string { return l.prefix() + "/" }

// Delta returns the key prefix of a delta of table's scope all:
// PREFIX/desired/TABLE/all/delta/DELTA/.
func (l Layout) Delta(table, delta string) string {
	return l.Scope(table, ScopeAll) + "delta/" + delta + "/"
}

// deltaName formats delta n (numbered with the generations).
func deltaName(n uint64) string { return fmt.Sprintf("d%012d", n) }

// isDelta tells whether a pin names a delta.
func isDelta(s string) bool {
	digits, ok := strings.CutPrefix(s, "d")
	return ok && parseGen("g"+digits) != 0
}

// genName formats generation n; the zero padding keeps them in order.
func genName(n uint64) string { return fmt.Sprintf("g%012d", n) }

// parseGen reads a generation name; 0 for none or a malformed one.
func parseGen(s string) uint64 {
	digits, ok := strings.CutPrefix(s, "g")
	if !ok || digits == "" {
		return 0
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// checkName rejects names that would break the layout.
func checkName(kind, s string) error {
	if s == "" || strings.ContainsAny(s, "/\x00") || strings.ContainsFunc(s, unicode.IsControl) {
		return fmt.Errorf("%s %q: must be non-empty and contain no '/' and no control character", kind, s)
	}
	return nil
}
