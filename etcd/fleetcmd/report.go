package fleetcmd

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.yaml.in/yaml/v3"

	"github.com/steadystate/steadystate/etcd"
)

// Report is what `fleet status` prints.
type Report struct {
	Summary  string       `json:"summary" yaml:"summary"`
	Revision int64        `json:"revision" yaml:"revision"` // the latest desired state's
	Received int          `json:"received" yaml:"received"` // live nodes that received their desired state
	Applied  int          `json:"applied" yaml:"applied"`   // live nodes that applied it
	Lost     int          `json:"lost" yaml:"lost"`
	Nodes    []NodeReport `json:"nodes" yaml:"nodes"` // live and lost, by name
	// Rollout is the rollout under way when the fleet was read, if any:
	// the nodes it switched and the others hold different desired
	// states, so Revision is not every node's and the summary names no
	// revision.
	Rollout *RolloutReport `json:"rollout,omitempty" yaml:"rollout,omitempty"`
	// Warnings name the keys under the prefix the view skipped.
	Warnings []string `json:"warnings,omitempty" yaml:"warnings,omitempty"`
	read     int64    // the etcd revision it was read at
}

// RolloutReport is the rollout under way, as `fleet status` says it.
type RolloutReport struct {
	ID       string `json:"id" yaml:"id"`
	State    string `json:"state" yaml:"state"` // etcd.RolloutRunning or etcd.RolloutPaused
	Step     int    `json:"step" yaml:"step"`   // the step under way, from 1
	Steps    int    `json:"steps" yaml:"steps"`
	Switched int    `json:"switched" yaml:"switched"` // nodes switched to its new state
	Nodes    int    `json:"nodes" yaml:"nodes"`
	// Unreadable says why its state does not parse (ID, Step and the
	// counts are then unknown).
	Unreadable string `json:"unreadable,omitempty" yaml:"unreadable,omitempty"`
}

// String is the line `fleet status` prints for it.
func (r RolloutReport) String() string {
	if r.Unreadable != "" {
		return fmt.Sprintf("a rollout is under way, its state unreadable (%s): nodes hold different desired states; `fleet rollout abort` rolls it back", r.Unreadable)
	}
	return fmt.Sprintf("rollout %s %s: step %d of %d, %d of %d nodes switched to its new state (`fleet rollout status` for each node's answer)",
		r.ID, r.State, min(r.Step, r.Steps), r.Steps, r.Switched, r.Nodes)
}

// readRollout reads the rollout under way as of revision rev (the fleet
// view's): nil when there is none.
func readRollout(ctx context.Context, c *clientv3.Client, l etcd.Layout, rev int64) (*RolloutReport, error) {
	resp, err := c.Txn(ctx).Then(clientv3.OpGet(l.RolloutActive(), clientv3.WithRev(rev)), clientv3.OpGet(l.RolloutDriver(), clientv3.WithRev(rev))).Commit()
	if err != nil {
		return nil, fmt.Errorf("reading the rollout under way: %w", err)
	}
	active, driver := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
	if len(active) == 0 {
		return nil, nil
	}
	var r etcd.Rollout
	if err := json.Unmarshal(active[0].Value, &r); err != nil || r.ID == "" {
		return &RolloutReport{Unreadable: fmt.Sprintf("%s: %v", l.RolloutActive(), cmp.Or[any](err, "no id"))}, nil
	}
	st := &RolloutReport{ID: r.ID, State: etcd.RolloutPaused, Step: r.Step + 1, Steps: len(r.Steps), Switched: r.Switched, Nodes: len(r.Nodes)}
	if len(driver) > 0 {
		st.State = etcd.RolloutRunning
	}
	return st, nil
}

// The states of a node in the report.
const (
	nodeLive = "live"
	nodeLost = "lost"
)

type NodeReport struct {
	etcd.NodeStatus `yaml:",inline"`
	// State is "live" (its agent keeps its status) or "lost" (its lease
	// expired without a clean stop: the status is its last, and what it
	// holds now is not known).
	State string `json:"state" yaml:"state"`
	// LastSeen and SeenRevision say when a lost node last wrote its record
	// (its clock) and at which etcd revision.
	LastSeen     time.Time `json:"lastSeen,omitzero" yaml:"lastSeen,omitempty"`
	SeenRevision int64     `json:"seenRevision,omitempty" yaml:"seenRevision,omitempty"`
	// NotDone are the node's objects not Done, by table and name, when it
	// keeps object statuses (--object-status) and --objects
	// asked for them.
	NotDone map[string]map[string]etcd.ObjectStatus `json:"notDone,omitempty" yaml:"notDone,omitempty"`
	// Desired is the revision of the node's desired state (fleet-wide
	// and its own); Received says whether its tables hold it, Applied
	// whether besides every object is Done (both false for a lost node).
	Desired  int64 `json:"desired" yaml:"desired"`
	Received bool  `json:"received" yaml:"received"`
	Applied  bool  `json:"applied" yaml:"applied"`
}

// Read reads every node's status, live or lost, and its desired revision
// over tables, and the rollout under way if any (as of the fleet view's
// revision); with objects, also each live node's objects not Done.
func Read(ctx context.Context, c *clientv3.Client, l etcd.Layout, tables []string, objects bool) (Report, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	view, err := etcd.Fleet(ctx, c, l)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Nodes: []NodeReport{}, read: view.Revision, Lost: len(view.Lost)}
	for _, w := range view.Warnings {
		rep.Warnings = append(rep.Warnings, w.String())
	}
	if rep.Rollout, err = readRollout(ctx, c, l, view.Revision); err != nil {
		return Report{}, err
	}
	// The fleet-wide state's revision counts even with no node up.
	if rep.Revision, err = fleetWideRevision(ctx, c, l, tables); err != nil {
		return Report{}, err
	}
	nodes := make([]NodeReport, 0, len(view.Nodes)+len(view.Lost))
	for _, st := range view.Nodes {
		nodes = append(nodes, NodeReport{NodeStatus: st, State: nodeLive})
	}
	for _, lost := range view.Lost {
		nodes = append(nodes, NodeReport{NodeStatus: lost.NodeStatus, State: nodeLost, LastSeen: lost.LastSeen, SeenRevision: lost.SeenRevision})
	}
	slices.SortFunc(nodes, func(a, b NodeReport) int { return strings.Compare(a.Node, b.Node) })
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Node
	}
	desired, err := etcd.DesiredRevisions(ctx, c, l, tables, names)
	if err != nil {
		return Report{}, err
	}
	for _, n := range nodes {
		n.Desired = desired[n.Node]
		if n.State == nodeLive {
			n.Received, n.Applied = n.NodeStatus.Received(n.Desired), n.NodeStatus.Applied(n.Desired)
		}
		if objects && n.State == nodeLive {
			if n.NotDone, err = notDone(ctx, c, l, n.Node, &rep); err != nil {
				return Report{}, err
			}
		}
		if n.Received {
			rep.Received++
		}
		if n.Applied {
			rep.Applied++
		}
		rep.Revision = max(rep.Revision, n.Desired)
		rep.Nodes = append(rep.Nodes, n)
	}
	rep.Summary = etcd.Summary(rep.Applied, len(rep.Nodes), rep.Lost, rep.Revision)
	if rep.Rollout != nil {
		rep.Summary = etcd.SummaryMixed(rep.Applied, len(rep.Nodes), rep.Lost, cmp.Or(rep.Rollout.ID, "unreadable"))
	}
	return rep, nil
}

// notDone reads node's object statuses not Done; keys skipped go to
// rep's warnings.
func notDone(ctx context.Context, c *clientv3.Client, l etcd.Layout, node string, rep *Report) (map[string]map[string]etcd.ObjectStatus, error) {
	all, warnings, err := etcd.ObjectStatusesWarn(ctx, c, l, node)
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		rep.Warnings = append(rep.Warnings, w.String())
	}
	var out map[string]map[string]etcd.ObjectStatus
	for table, byName := range all {
		for name, ost := range byName {
			if ost.Kind == etcd.Done {
				continue
			}
			if out == nil {
				out = map[string]map[string]etcd.ObjectStatus{}
			}
			if out[table] == nil {
				out[table] = map[string]etcd.ObjectStatus{}
			}
			out[table][name] = ost
		}
	}
	return out, nil
}

// fleetWideRevision is the revision of the last change to the fleet-wide
// desired state: the latest ModRevision of the tables' current keys of
// scope all (as etcd.DesiredRevision, which always adds a node's scope),
// read in one transaction.
func fleetWideRevision(ctx context.Context, c *clientv3.Client, l etcd.Layout, tables []string) (int64, error) {
	var ops []clientv3.Op
	for _, t := range tables {
		ops = append(ops, clientv3.OpGet(l.Current(t, etcd.ScopeAll)))
	}
	resp, err := c.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return 0, fmt.Errorf("reading the fleet-wide desired state: %w", err)
	}
	var rev int64
	for _, r := range resp.Responses {
		for _, kv := range r.GetResponseRange().Kvs {
			rev = max(rev, kv.ModRevision)
		}
	}
	return rev, nil
}

// Print writes rep as a table (then the objects not Done, the warnings,
// and the summary last), JSON or YAML.
func (rep Report) Print(w io.Writer, format string) error {
	switch format {
	case "json":
		b, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(rep)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "---\n%s", b)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tREACHED\tDESIRED\tRECEIVED\tAPPLIED\tOBJECTS\tERRORS")
	for _, n := range rep.Nodes {
		state, received, applied := n.State, yesNo(n.Received), yesNo(n.Applied)
		if n.State == nodeLost {
			state = fmt.Sprintf("lost (last seen %s at revision %d)", n.LastSeen.UTC().Format(time.RFC3339), n.SeenRevision)
			received, applied = "-", "-" // not known
		}
		var counts []string
		for _, k := range slices.Sorted(maps.Keys(n.Objects)) {
			counts = append(counts, fmt.Sprintf("%s=%d", k, n.Objects[k]))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", n.Node, state, n.Revision, n.Desired, received, applied,
			strings.Join(counts, " "), strings.Join(n.Errors, "; "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range rep.Nodes {
		for _, table := range slices.Sorted(maps.Keys(n.NotDone)) {
			for _, name := range slices.Sorted(maps.Keys(n.NotDone[table])) {
				ost := n.NotDone[table][name]
				key, err := url.PathUnescape(name)
				if err != nil {
					key = name // garbage: shown as it is, never dropped
				}
				fmt.Fprintf(w, "  %s: %s %s: %s %s\n", n.Node, table, key, ost.Kind, ost.Error)
			}
		}
	}
	for _, warning := range rep.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warning)
	}
	if rep.Rollout != nil {
		fmt.Fprintln(w, rep.Rollout)
	}
	_, err := fmt.Fprintln(w, rep.Summary)
	return err
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
