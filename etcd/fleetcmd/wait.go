package fleetcmd

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/steadystate/steadystate/etcd"
)

// defaultWaitTimeout is `fleet status --wait`'s default --timeout.
const defaultWaitTimeout = 5 * time.Minute

// waitOptions are `fleet status --wait`'s.
type waitOptions struct {
	revision int64 // 0: the latest desired state's, when the wait starts
	timeout  time.Duration
	objects  bool
	waiting  func() // called each time it starts waiting for a change (tests)
}

// waitVerdict tells where rep stands for the desired state of revision rev:
// done when no rollout is under way, at least one node is live and every
// live node applied its current desired state (the state rev holds for it,
// or a later one: during a rollout the nodes not reached hold the old
// state, so it is never done then);
// failed (the nodes, with their errors) when a live node that received it
// reports objects in Error, Rejected or DeleteFailing (NodeStatus.Failed);
// neither while rep's latest desired
// state is older than rev, or no node is live (nodes not started yet, or
// all lost: nothing is applied anywhere known).
func waitVerdict(rep Report, rev int64) (done bool, failed []string) {
	if rep.Revision < rev {
		return false, nil // the state of rev is not written yet
	}
	done = true
	live := 0
	for _, n := range rep.Nodes {
		if n.State != nodeLive {
			continue
		}
		live++
		if n.NodeStatus.Failed(n.Desired) {
			failed = append(failed, fmt.Sprintf("%s (Error=%d, %s=%d, %s=%d: %s)", n.Node, n.Objects["Error"], etcd.Rejected, n.Objects[etcd.Rejected],
				etcd.DeleteFailing, n.Objects[etcd.DeleteFailing], strings.Join(n.Errors, "; ")))
		}
		done = done && n.Applied
	}
	return done && live > 0 && rep.Rollout == nil, failed
}

// waitFleet is `fleet status --wait`: it reads the fleet, and again after
// every change under the prefix (an etcd watch from the revision read),
// until waitVerdict says done or failed or the timeout passes; then it
// prints the status last read and returns nil (exit 0) or an ExitError of
// code WaitFailed or WaitTimedOut. While a rollout is under way it says so
// on errw (each time the rollout's line changes).
func waitFleet(ctx context.Context, c *clientv3.Client, l etcd.Layout, tables []string, o waitOptions, w, errw io.Writer, format string) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	rep, err := Read(ctx, c, l, tables, o.objects)
	if err != nil {
		return err
	}
	rev := o.revision
	if rev == 0 {
		rev = rep.Revision
	}
	said := ""
	for {
		done, failed := waitVerdict(rep, rev)
		switch {
		case len(failed) > 0:
			if err := rep.Print(w, format); err != nil {
				return err
			}
			return ExitError{Code: WaitFailed, Err: fmt.Errorf("revision %d: %d live node(s) report errors: %s", rev, len(failed), strings.Join(failed, ", "))}
		case done:
			return rep.Print(w, format)
		}
		if rep.Rollout != nil && rep.Rollout.String() != said {
			said = rep.Rollout.String()
			fmt.Fprintf(errw, "waiting for the rollout under way to finish: %s\n", said)
		}
		if o.waiting != nil {
			o.waiting()
		}
		if err := waitChange(ctx, c, l.Root(), rep.read); err != nil && ctx.Err() == nil {
			// A lost watch (etcd unreachable, compacted): read again, and
			// watch from there, after a pause.
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
		if ctx.Err() != nil {
			return waitTimeout(c, l, tables, o, rep, rev, w, format)
		}
		if next, err := Read(ctx, c, l, tables, o.objects); err == nil {
			rep = next
		} else if ctx.Err() != nil {
			return waitTimeout(c, l, tables, o, rep, rev, w, format)
		}
	}
}

// waitTimeout prints the fleet as read once more (or as last read, if
// etcd does not answer within a few seconds) and returns the timeout's
// ExitError.
func waitTimeout(c *clientv3.Client, l etcd.Layout, tables []string, o waitOptions, last Report, rev int64, w io.Writer, format string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if rep, err := Read(ctx, c, l, tables, o.objects); err == nil {
		last = rep
	}
	if err := last.Print(w, format); err != nil {
		return err
	}
	why := ""
	if last.Rollout != nil {
		why = "; " + last.Rollout.String()
	}
	return ExitError{Code: WaitTimedOut, Err: fmt.Errorf("timed out after %v waiting for every live node to apply revision %d: %s%s", o.timeout, rev, last.Summary, why)}
}

// waitChange returns once a key under prefix changed after revision
// after, or with the error of a lost watch, or when ctx ends.
func waitChange(ctx context.Context, c *clientv3.Client, prefix string, after int64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for resp := range c.Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(after+1)) {
		if err := resp.Err(); err != nil {
			return err
		}
		if len(resp.Events) > 0 {
			return nil
		}
	}
	return ctx.Err()
}
