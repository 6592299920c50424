package fleetcell

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/steadystate/steadystate/etcd"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/statedb"
)

// reportSettle is how long the reporter lets a burst of changes settle
// before it reads them.
const reportSettle = 10 * time.Millisecond

// recheckInterval is how often the reporter reads the node again while
// objects fail (a retried delete that succeeds changes no table).
const recheckInterval = time.Second

// after returns a channel that closes after d.
func after(d time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	time.AfterFunc(d, func() { close(ch) })
	return ch
}

// reporter publishes the node's status: the revision reached (every change
// of the desired state up to it is in the tables and was attempted), the
// objects by status and the latest errors, whenever the tables changed
// and the reconcilers caught up with them, or the revision moved.
type reporter struct {
	n      *Node
	db     *statedb.DB
	tables []reportedTable
}

// run is the reporter's job. The revision reached is the reflector's: one
// number for every table, which move together. It moves only with changes
// of this node's desired state (see etcd.Source), so every move is
// published: a node that reached its desired revision says so at once.
func (r *reporter) run(ctx context.Context, health cell.Health) error {
	select {
	case <-r.n.started:
	case <-ctx.Done():
		return nil
	}
	var lastRevs []statedb.Revision
	var lastRejected []string
	lastReached := uint64(0)
	recheck := false             // a failure was reported: read again after a while
	var recheckC <-chan struct{} // closes when it is time to
	ws := statedb.NewWatchSet()
	for {
		reached, moved := r.n.desired.RevisionWatch()
		txn := r.db.ReadTxn()
		revs := make([]statedb.Revision, len(r.tables))
		ws.Clear()
		ws.Add(moved)
		if recheckC != nil {
			ws.Add(recheckC)
		}
		for i, t := range r.tables {
			var watch <-chan struct{}
			revs[i], watch = t.revision(txn)
			ws.Add(watch)
		}
		rejected := r.rejected()
		if reached > 0 && (recheck || reached != lastReached || !slices.Equal(revs, lastRevs) || !slices.Equal(rejected, lastRejected)) {
			failing, err := r.waitReconciled(ctx, revs)
			if err != nil {
				return nil // ctx ended
			}
			st := etcd.NodeStatus{Node: r.n.cfg.Node, Revision: int64(reached), Objects: map[string]int{}}
			txn := r.db.ReadTxn()
			// Objects whose value the node refused count as not
			// applied: the table still holds their last good version.
			if len(rejected) > 0 {
				st.Objects[etcd.Rejected] = len(rejected)
				st.Errors = append(st.Errors, rejected[:min(len(rejected), maxReportedErrors)]...)
			}
			for i, t := range r.tables {
				// Failures the table does not show are deletes: the
				// object is gone from the desired state, not from the
				// real system.
				if deletes := failing[i] - t.count(txn, &st); deletes > 0 {
					st.Objects[etcd.DeleteFailing] += deletes
					st.Errors = append(st.Errors, fmt.Sprintf("%s: %d removed objects still in the real system (their delete fails and is retried; the node's health names them)", t.name, deletes))
				}
				if r.n.cfg.ObjectStatus {
					r.n.pub.PublishObjects(t.name, t.objects(txn))
				}
			}
			r.n.publish(st)
			lastReached, lastRevs, lastRejected = reached, revs, rejected
			// A retry that succeeds changes no table when it is a
			// delete: while anything fails, look again now and then.
			recheck = slices.ContainsFunc(failing, func(n int) bool { return n > 0 })
			recheckC = nil
			if recheck {
				recheckC = after(recheckInterval)
				ws.Add(recheckC)
			}
			health.OK(fmt.Sprintf("revision %d reported", reached))
			r.n.once.Do(func() { close(r.n.listed) }) // every table listed once
		}
		// The reflector's commit wakes the tables' watchers just before its
		// revision moves: settle, so that one change makes one status.
		if _, err := ws.Wait(ctx, reportSettle); err != nil {
			return nil // ctx ended
		}
	}
}

// rejected returns what the reflector refused, as "TABLE KEY: rejected: ERROR".
func (r *reporter) rejected() []string {
	var out []string
	for _, rej := range r.n.desired.Rejected() {
		out = append(out, fmt.Sprintf("%s %s: rejected: %s", rej.Table, keyOf(rej.Key), rej.Error))
	}
	return out
}

// waitReconciled waits until each reconciler processed its table up to
// revs (every object in them was attempted) and returns how many objects
// of each failed; an error only when ctx ends.
func (r *reporter) waitReconciled(ctx context.Context, revs []statedb.Revision) ([]int, error) {
	failing := make([]int, len(r.tables))
	for i, t := range r.tables {
		var err error
		if failing[i], err = t.wait(ctx, revs[i]); err != nil {
			return nil, err
		}
	}
	return failing, nil
}
