package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// DesiredRevision returns the etcd revision of the last change to node's
// desired state in tables: the largest ModRevision of the current keys of
// each table's scopes ScopeAll and NodeScope(node) and of the node's pins
// (Layout.Pin), read in one transaction, so at one revision. It is 0 when
// nothing was ever applied to those scopes. A node whose reflectors'
// revisions (reflector.Revision, through Source) are all at or past it
// holds that desired state.
//
// It relies on Apply and on the rollouts: every transaction of Apply that
// changes a scope rewrites the scope's current key, whether in place (the
// changed objects and the pointer, rewritten with the same generation, in
// one transaction) or by putting a staged generation in force (the
// pointer alone); an unchanged state writes nothing, and nothing else
// Apply writes is a change a node sees (a generation being staged is not
// in force yet, an old one is deleted after the flip, and the counter of
// generations is not desired state). A rollout moves a node by writing
// its pins, and the transaction that removes the pins (completed or
// rolled back) rewrites the current keys of the tables it pinned. A write
// into a generation's keys that bypasses these is not seen here.
//
// Each table takes three reads, and one etcd transaction holds 128
// operations by default: more than 42 distinct tables are an error, as are
// a bad table or node name.
func DesiredRevision(ctx context.Context, c *clientv3.Client, l Layout, tables []string, node string) (int64, error) {
	if c == nil {
		return 0, errors.New("desired revision: client is nil")
	}
	if err := checkName("node", node); err != nil {
		return 0, fmt.Errorf("desired revision: %w", err)
	}
	tables = slices.Compact(slices.Sorted(slices.Values(tables)))
	if 3*len(tables) > maxTxnOps {
		return 0, fmt.Errorf("desired revision of %s: %d tables take %d reads, more than one etcd transaction holds (%d)",
			node, len(tables), 3*len(tables), maxTxnOps)
	}
	var ops []clientv3.Op
	for _, table := range tables {
		if err := checkName("table", table); err != nil {
			return 0, fmt.Errorf("desired revision: %w", err)
		}
		ops = append(ops, clientv3.OpGet(l.Current(table, ScopeAll)), clientv3.OpGet(l.Current(table, NodeScope(node))),
			clientv3.OpGet(l.Pin(table, node)))
	}
	if len(ops) == 0 {
		return 0, nil
	}
	resp, err := c.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return 0, fmt.Errorf("desired revision of %s: reading the current keys of %v: %w", node, tables, err)
	}
	var rev int64
	for _, r := range resp.Responses {
		for _, kv := range r.GetResponseRange().GetKvs() {
			rev = max(rev, kv.ModRevision)
		}
	}
	return rev, nil
}

// DesiredRevisions is DesiredRevision of many nodes at once: node → the
// revision of the last change to its desired state in tables. It reads
// each node's keys (its scope's current key and its pin of each table)
// in transactions within etcd's limit (128 reads), whole nodes in each,
// and then the fleet-wide current keys once, so a fleet of N nodes costs
// about 2NT/128 round trips for T tables instead of N. The reads of
// different transactions are at different revisions; each node's value
// is one that was true at some point during the call: a node's keys are
// read before the fleet-wide ones, and the transaction that removes pins
// rewrites the fleet-wide current keys, so a pin read as gone is never
// combined with current keys read from before it went.
//
// Errors: more than 64 distinct tables, a bad table or node name, etcd's.
func DesiredRevisions(ctx context.Context, c *clientv3.Client, l Layout, tables []string, nodes []string) (map[string]int64, error) {
	if c == nil {
		return nil, errors.New("desired revisions: client is nil")
	}
	tables = slices.Compact(slices.Sorted(slices.Values(tables)))
	if 2*len(tables) > maxTxnOps {
		return nil, fmt.Errorf("desired revisions: %d tables take %d reads per node, more than one etcd transaction holds (%d)",
			len(tables), 2*len(tables), maxTxnOps)
	}
	for _, table := range tables {
		if err := checkName("table", table); err != nil {
			return nil, fmt.Errorf("desired revisions: %w", err)
		}
	}
	for _, node := range nodes {
		if err := checkName("node", node); err != nil {
			return nil, fmt.Errorf("desired revisions: %w", err)
		}
	}
	out := make(map[string]int64, len(nodes))
	if len(tables) == 0 {
		for _, node := range nodes {
			out[node] = 0
		}
		return out, nil
	}
	// latest reads ops in one transaction: the latest ModRevision of each
	// group of per reads.
	latest := func(ops []clientv3.Op, per int) ([]int64, error) {
		resp, err := c.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, fmt.Errorf("desired revisions: reading the current keys of %v: %w", tables, err)
		}
		revs := make([]int64, len(ops)/per)
		for i, r := range resp.Responses {
			for _, kv := range r.GetResponseRange().GetKvs() {
				revs[i/per] = max(revs[i/per], kv.ModRevision)
			}
		}
		return revs, nil
	}
	per := 2 * len(tables)
	batch := maxTxnOps / per // whole nodes per transaction
	for from := 0; from < len(nodes); from += batch {
		group := nodes[from:min(from+batch, len(nodes))]
		var ops []clientv3.Op
		for _, node := range group {
			for _, table := range tables {
				ops = append(ops, clientv3.OpGet(l.Current(table, NodeScope(node))), clientv3.OpGet(l.Pin(table, node)))
			}
		}
		revs, err := latest(ops, per)
		if err != nil {
			return nil, err
		}
		for i, node := range group {
			out[node] = revs[i]
		}
	}
	var ops []clientv3.Op
	for _, table := range tables {
		ops = append(ops, clientv3.OpGet(l.Current(table, ScopeAll)))
	}
	fleet, err := latest(ops, len(ops))
	if err != nil {
		return nil, err
	}
	for _, node := range nodes {
		out[node] = max(out[node], fleet[0])
	}
	return out, nil
}
