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
// each table's scopes ScopeAll and NodeScope(node), read in one
// transaction, so at one revision. It is 0 when nothing was ever applied to
// those scopes. A node whose reflectors' revisions (reflector.Revision,
// through Source) are all at or past it holds that desired state.
//
// It relies on Apply: every transaction of Apply that changes a scope
// rewrites the scope's current key, whether in place (the changed objects
// and the pointer, rewritten with the same generation, in one transaction)
// or by putting a staged generation in force (the pointer alone); an
// unchanged state writes nothing, and nothing else Apply writes is a
// change a node sees (a generation being staged is not in force yet, an
// old one is deleted after the flip, and the counter of generations is not
// desired state). A write into a generation's keys that bypasses Apply is
// not seen here.
//
// Each table takes two reads, and one etcd transaction holds 128
// operations by default: more than 64 distinct tables are an error, as are
// a bad table or node name.
func DesiredRevision(ctx context.Context, c *clientv3.Client, l Layout, tables []string, node string) (int64, error) {
	if c == nil {
		return 0, errors.New("desired revision: client is nil")
	}
	if err := checkName("node", node); err != nil {
		return 0, fmt.Errorf("desired revision: %w", err)
	}
	tables = slices.Compact(slices.Sorted(slices.Values(tables)))
	if 2*len(tables) > maxTxnOps {
		return 0, fmt.Errorf("desired revision of %s: %d tables take %d reads, more than one etcd transaction holds (%d)",
			node, len(tables), 2*len(tables), maxTxnOps)
	}
	var ops []clientv3.Op
	for _, table := range tables {
		if err := checkName("table", table); err != nil {
			return 0, fmt.Errorf("desired revision: %w", err)
		}
		ops = append(ops, clientv3.OpGet(l.Current(table, ScopeAll)), clientv3.OpGet(l.Current(table, NodeScope(node))))
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
// revision of the last change to its desired state in tables. It reads the
// fleet-wide current keys once and each node's in transactions within
// etcd's limit (128 reads), so a fleet of N nodes costs about 3N/128 round
// trips instead of N. The reads of different transactions are at different
// revisions; each node's value is one that was true at some point during
// the call.
func DesiredRevisions(ctx context.Context, c *clientv3.Client, l Layout, tables []string, nodes []string) (map[string]int64, error) {
	if c == nil {
		return nil, errors.New("desired revisions: client is nil")
	}
	tables = slices.Compact(slices.Sorted(slices.Values(tables)))
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
	read := func(ops []clientv3.Op) ([]int64, error) {
		out := make([]int64, 0, len(ops))
		for len(ops) > 0 {
			n := min(len(ops), maxTxnOps)
			resp, err := c.Txn(ctx).Then(ops[:n]...).Commit()
			if err != nil {
				return nil, fmt.Errorf("desired revisions: reading the current keys of %v: %w", tables, err)
			}
			for _, r := range resp.Responses {
				var rev int64
				for _, kv := range r.GetResponseRange().GetKvs() {
					rev = kv.ModRevision
				}
				out = append(out, rev)
			}
			ops = ops[n:]
		}
		return out, nil
	}
	var ops []clientv3.Op
	for _, table := range tables {
		ops = append(ops, clientv3.OpGet(l.Current(table, ScopeAll)))
	}
	for _, node := range nodes {
		for _, table := range tables {
			ops = append(ops, clientv3.OpGet(l.Current(table, NodeScope(node))))
		}
	}
	revs, err := read(ops)
	if err != nil {
		return nil, err
	}
	var fleet int64
	for _, r := range revs[:len(tables)] {
		fleet = max(fleet, r)
	}
	out := make(map[string]int64, len(nodes))
	for i, node := range nodes {
		rev := fleet
		for _, r := range revs[len(tables)+i*len(tables) : len(tables)+(i+1)*len(tables)] {
			rev = max(rev, r)
		}
		out[node] = rev
	}
	return out, nil
}
