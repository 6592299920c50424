package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// View is the fleet as its nodes report it, read at one revision.
type View struct {
	// Nodes are the live nodes (a status under a live lease), by name.
	Nodes []NodeStatus
	// Lost are the nodes whose lease expired without a clean stop (a
	// crash, a partition longer than the TTL), by name: each stays until
	// it runs again or is forgotten (Forget).
	Lost []LostNode
	// Warnings name the keys skipped: malformed or foreign keys under the
	// status and record prefixes. None of them hides the others.
	Warnings []Warning
	Revision int64 // etcd revision the view was read at
}

// LostNode is a lost node as its record tells it.
type LostNode struct {
	NodeStatus // the last status it wrote
	// LastSeen is the node's clock when it last wrote its record: its
	// agent was alive then, and wrote it at least every SeenInterval.
	LastSeen time.Time
	// SeenRevision is the etcd revision of that write.
	SeenRevision int64
}

// Warning is a key a view skipped, and why.
type Warning struct {
	Key     string
	Problem string
}

func (w Warning) String() string {
	key := w.Key
	if strings.ContainsFunc(key, func(r rune) bool { return !unicode.IsPrint(r) }) {
		key = strconv.Quote(key) // a key of garbage never breaks the lines it is printed in
	}
	return key + ": " + w.Problem
}

// ErrNodeLive is wrapped by Forget's error for a node that is live: its
// agent runs and keeps its status, so there is nothing lost to forget.
var ErrNodeLive = errors.New("node is live")

// ErrNodeUnknown is wrapped by Forget's error for a node the fleet has no
// record of (neither live nor lost).
var ErrNodeUnknown = errors.New("node not in the fleet")

// Fleet reads every node's status and record, and the layout version, in
// one transaction: the live nodes, the lost ones, and a warning for each
// key it skipped. A node's name is its key's, whatever the value says. It
// fails only when etcd does, and with ErrUnknownLayout when the prefix
// holds a layout version this package does not know.
func Fleet(ctx context.Context, c *clientv3.Client, l Layout) (View, error) {
	resp, err := c.Txn(ctx).Then(
		clientv3.OpGet(l.VersionKey()),
		clientv3.OpGet(l.StatusPrefix(), clientv3.WithPrefix()),
		clientv3.OpGet(l.RecordPrefix(), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return View{}, fmt.Errorf("reading %s and %s: %w", l.StatusPrefix(), l.RecordPrefix(), err)
	}
	if err := checkVersion(l, resp.Responses[0].GetResponseRange().Kvs); err != nil {
		return View{}, err
	}
	v := View{Revision: resp.Header.Revision}
	live := map[string]bool{} // every node with a status key, readable or not
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		node, ok := v.nodeName(kv, l.StatusPrefix())
		if !ok {
			continue
		}
		live[node] = true
		var st NodeStatus
		if err := json.Unmarshal(kv.Value, &st); err != nil {
			// The node is there, but what it holds is not known: it is
			// listed (and counted) as not applied, never hidden.
			v.Warnings = append(v.Warnings, Warning{Key: string(kv.Key),
				Problem: fmt.Sprintf("%s (%v); node %s is listed, its status unknown", unreadableStatus, err, node)})
			v.Nodes = append(v.Nodes, NodeStatus{Node: node, Errors: []string{"status unreadable: not a node status"}})
			continue
		}
		v.Nodes = append(v.Nodes, v.named(kv, node, st))
	}
	for _, kv := range resp.Responses[2].GetResponseRange().Kvs {
		node, ok := v.nodeName(kv, l.RecordPrefix())
		if !ok || live[node] {
			continue
		}
		var rec NodeRecord
		if err := json.Unmarshal(kv.Value, &rec); err != nil {
			v.warn(kv, fmt.Sprintf("not a node record (%v); forgetting node %s removes it", err, node))
			continue
		}
		v.Lost = append(v.Lost, LostNode{NodeStatus: v.named(kv, node, rec.NodeStatus), LastSeen: rec.LastSeen, SeenRevision: kv.ModRevision})
	}
	slices.SortFunc(v.Nodes, func(a, b NodeStatus) int { return strings.Compare(a.Node, b.Node) })
	slices.SortFunc(v.Lost, func(a, b LostNode) int { return strings.Compare(a.Node, b.Node) })
	return v, nil
}

// unreadableStatus begins the problem of a warning about a live node's
// status that does not parse.
const unreadableStatus = "not a node status"

// nodeName is the node a key under prefix names; a key that names none
// (a foreign key: PREFIX/status/a/b) is warned about.
func (v *View) nodeName(kv *mvccpb.KeyValue, prefix string) (string, bool) {
	node := strings.TrimPrefix(string(kv.Key), prefix)
	if err := checkName("node", node); err != nil {
		v.warn(kv, fmt.Sprintf("not a node's key (%sNODE, NODE without '/')", prefix))
		return "", false
	}
	return node, true
}

// named is st under the node name of its key; a value that names another
// node is warned about (one that names none is not).
func (v *View) named(kv *mvccpb.KeyValue, node string, st NodeStatus) NodeStatus {
	if st.Node != "" && st.Node != node {
		v.Warnings = append(v.Warnings, Warning{Key: string(kv.Key),
			Problem: fmt.Sprintf("names node %q; shown as %s, the key's", st.Node, node)})
		st.Node = node
	}
	return st
}

func (v *View) warn(kv *mvccpb.KeyValue, problem string) {
	v.Warnings = append(v.Warnings, Warning{Key: string(kv.Key), Problem: problem + "; skipped"})
}

// Forget removes a lost node's record: the node leaves the fleet view. It
// fails with ErrNodeLive when the node has a status (its agent runs: stop
// it first, and a clean stop removes the record itself) and with
// ErrNodeUnknown when there is no record; a bad node name is an error too.
// Check and delete are one transaction: a node that comes back meanwhile
// is not forgotten.
func Forget(ctx context.Context, c *clientv3.Client, l Layout, node string) error {
	if err := checkName("node", node); err != nil {
		return fmt.Errorf("forget: %w", err)
	}
	status, record := l.Status(node), l.Record(node)
	tr, err := c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(status), "=", 0)).
		Then(clientv3.OpDelete(record)).Commit()
	switch {
	case err != nil:
		return fmt.Errorf("forget %s: %w", node, err)
	case !tr.Succeeded:
		return fmt.Errorf("forget %s: %w (%s exists: its agent runs; stop it first: a clean stop leaves no record)", node, ErrNodeLive, status)
	case tr.Responses[0].GetResponseDeleteRange().Deleted == 0:
		return fmt.Errorf("forget %s: %w (no record %s: neither live nor lost)", node, ErrNodeUnknown, record)
	}
	return nil
}

// ObjectStatuses reads node's object statuses (kept only with
// PublisherConfig.ObjectStatuses): table → name → status. Keys that are
// not PREFIX/objects/NODE/TABLE/NAME holding a JSON status are skipped;
// ObjectStatusesWarn names them.
func ObjectStatuses(ctx context.Context, c *clientv3.Client, l Layout, node string) (map[string]map[string]ObjectStatus, error) {
	out, _, err := ObjectStatusesWarn(ctx, c, l, node)
	return out, err
}

// ObjectStatusesWarn is ObjectStatuses with a warning for each key it
// skipped.
func ObjectStatusesWarn(ctx context.Context, c *clientv3.Client, l Layout, node string) (map[string]map[string]ObjectStatus, []Warning, error) {
	if err := checkName("node", node); err != nil {
		return nil, nil, err
	}
	prefix := l.ObjectStatusPrefix(node)
	resp, err := c.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", prefix, err)
	}
	out := map[string]map[string]ObjectStatus{}
	var warnings []Warning
	for _, kv := range resp.Kvs {
		table, name, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), prefix), "/")
		var st ObjectStatus
		if !ok || checkName("table", table) != nil || checkName("object name", name) != nil || json.Unmarshal(kv.Value, &st) != nil {
			warnings = append(warnings, Warning{Key: string(kv.Key), Problem: "not TABLE/NAME holding a JSON object status; skipped"})
			continue
		}
		if out[table] == nil {
			out[table] = map[string]ObjectStatus{}
		}
		out[table][name] = st
	}
	return out, warnings, nil
}

// Applied returns how many of the live nodes have applied the desired
// state of revision rev, and how many nodes there are, live and lost (a
// lost node is never counted as applied: what it holds now is not known).
// A node's revision moves only with changes of its own desired state, so
// rev must be every node's DesiredRevision (a fleet-wide apply's, with no
// node's own scope changed since); otherwise compare each node with its
// own, as fleetcmd.Read does.
func (v View) Applied(rev int64) (n, of int) {
	for _, s := range v.Nodes {
		if s.Applied(rev) {
			n++
		}
	}
	return n, len(v.Nodes) + len(v.Lost)
}

// Summary says "applied on N of M nodes at revision R", M counting the
// live and the lost nodes, followed by " (K lost)" when K > 0.
func (v View) Summary(rev int64) string {
	n, m := v.Applied(rev)
	return Summary(n, m, len(v.Lost), rev)
}

// SummaryMixed is the fleet's summary line while a rollout is under way:
// the nodes hold different desired states, so it names no one revision:
// "applied on N of M nodes, each at its own desired state (rollout ID under
// way)", and " (K lost)" when lost > 0.
func SummaryMixed(applied, nodes, lost int, rollout string) string {
	s := fmt.Sprintf("applied on %d of %d nodes, each at its own desired state (rollout %s under way)", applied, nodes, rollout)
	if lost > 0 {
		s += fmt.Sprintf(" (%d lost)", lost)
	}
	return s
}

// Summary is the fleet's summary line: "applied on N of M nodes at
// revision R", and " (K lost)" when lost > 0; every program that says it
// (View.Summary, agent fleet status) says it with this.
func Summary(applied, nodes, lost int, rev int64) string {
	s := fmt.Sprintf("applied on %d of %d nodes at revision %d", applied, nodes, rev)
	if lost > 0 {
		s += fmt.Sprintf(" (%d lost)", lost)
	}
	return s
}
