package etcd

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// cleanupTimeout bounds the deletes that clean up after a failed or
// finished apply: they must not wait for a cluster that went away.
const cleanupTimeout = 5 * time.Second

// cleanupCtx is a context for cleaning up after ctx's work, even when ctx
// ended, bounded by cleanupTimeout.
func cleanupCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
}

// ApplyTables is Apply of several tables of one scope at once (table →
// name → value): readers see every table's old state or every table's new
// state, never a mix. A change that fits in one transaction over all the
// tables is made in place in one transaction; otherwise each changed
// table's new generation is staged and all are put in force by one
// transaction, which fails with ErrConflict if another apply of any of
// those tables and scope came in between. A table missing from tables is
// left alone; a table with no objects is emptied. It returns the revision
// at which the new state is in force (for an unchanged state: the latest
// revision at which any of the tables' scope changed).
func ApplyTables(ctx context.Context, c *clientv3.Client, l Layout, scope string, tables map[string]map[string][]byte) (int64, error) {
	if err := checkScope(scope); err != nil {
		return 0, err
	}
	names := slices.Sorted(maps.Keys(tables))
	if 3*len(names) > maxTxnOps {
		return 0, fmt.Errorf("%d tables: more than one transaction can put in force", len(names))
	}
	for _, table := range names {
		if err := checkName("table", table); err != nil {
			return 0, err
		}
		for name := range tables[table] {
			if err := checkName("object name", name); err != nil {
				return 0, fmt.Errorf("table %s: %w", table, err)
			}
		}
	}
	// The generations in force, at one revision.
	var gets []clientv3.Op
	for _, table := range names {
		gets = append(gets, clientv3.OpGet(l.Current(table, scope)))
	}
	resp, err := c.Txn(ctx).Then(gets...).Commit()
	if err != nil {
		return 0, fmt.Errorf("reading the generations in force of %s: %w", scope, err)
	}
	readRev := resp.Header.Revision
	type inForce struct {
		gen string
		mod int64
	}
	cur := map[string]inForce{}
	var lastMod int64
	for i, table := range names {
		if kvs := resp.Responses[i].GetResponseRange().Kvs; len(kvs) > 0 {
			cur[table] = inForce{gen: string(kvs[0].Value), mod: kvs[0].ModRevision}
			lastMod = max(lastMod, kvs[0].ModRevision)
		}
	}
	unchanged := func(t string) clientv3.Cmp {
		return clientv3.Compare(clientv3.ModRevision(l.Current(t, scope)), "=", cur[t].mod)
	}

	// What changed, and whether it fits in one transaction in place
	// (every changed table has a generation in force).
	var ops []clientv3.Op
	var cmps []clientv3.Cmp
	var changed []string
	size, inPlace := 0, true
	for _, table := range names {
		if cur[table].gen == "" {
			if len(tables[table]) > 0 {
				changed = append(changed, table)
				inPlace = false
			}
			continue
		}
		tops, n, err := inPlaceOps(ctx, c, l.Generation(table, scope, cur[table].gen), readRev, tables[table])
		if err != nil {
			return 0, err
		}
		if len(tops) > 0 {
			changed = append(changed, table)
			ops = append(ops, tops...)
			ops = append(ops, clientv3.OpPut(l.Current(table, scope), cur[table].gen))
			cmps = append(cmps, unchanged(table))
			size += n
		}
	}
	if len(changed) == 0 {
		return lastMod, nil // nothing to write
	}
	if inPlace && len(ops) <= maxTxnOps && size <= maxTxnBytes {
		tr, err := c.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err == nil && !tr.Succeeded {
			err = fmt.Errorf("%w (a table of %s changed meanwhile)", ErrConflict, scope)
		}
		if err != nil {
			return 0, fmt.Errorf("applying in place to %s: %w", scope, err)
		}
		return tr.Header.Revision, nil
	}

	// Staged: a new generation per table, all put in force at once.
	staged := map[string]string{}
	dropStaged := func() {
		cctx, cancel := cleanupCtx(ctx)
		defer cancel()
		for table, gen := range staged {
			c.Delete(cctx, l.Generation(table, scope, gen), clientv3.WithPrefix())
		}
	}
	var flip []clientv3.Op
	cmps = cmps[:0]
	for _, table := range changed {
		gen, err := nextGeneration(ctx, c, l, table, scope)
		if err != nil {
			dropStaged()
			return 0, err
		}
		staged[table] = gen
		if err := stage(ctx, c, l.Generation(table, scope, gen), tables[table]); err != nil {
			dropStaged()
			return 0, err
		}
		flip = append(flip, clientv3.OpPut(l.Current(table, scope), gen))
		cmps = append(cmps, unchanged(table))
	}
	tr, err := c.Txn(ctx).If(cmps...).Then(flip...).Commit()
	if err == nil && !tr.Succeeded {
		err = fmt.Errorf("%w (a table of %s changed while its new generation was staged)", ErrConflict, scope)
	}
	if err != nil {
		dropStaged()
		return 0, fmt.Errorf("putting the new generations of %s in force: %w", scope, err)
	}
	// The readers moved on; a failure only leaves garbage behind.
	cctx, cancel := cleanupCtx(ctx)
	defer cancel()
	for _, table := range changed {
		if old := cur[table].gen; old != "" {
			c.Delete(cctx, l.Generation(table, scope, old), clientv3.WithPrefix())
		}
	}
	return tr.Header.Revision, nil
}

// inPlaceOps returns the puts and deletes that turn the generation under
// prefix (as of revision rev) into objects, and their size in bytes.
func inPlaceOps(ctx context.Context, c *clientv3.Client, prefix string, rev int64, objects map[string][]byte) ([]clientv3.Op, int, error) {
	resp, err := c.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev))
	if err != nil {
		return nil, 0, fmt.Errorf("reading %s: %w", prefix, err)
	}
	have := make(map[string][]byte, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		have[string(kv.Key[len(prefix):])] = kv.Value
	}
	var ops []clientv3.Op
	size := 0
	for _, name := range slices.Sorted(maps.Keys(objects)) {
		if old, ok := have[name]; ok && string(old) == string(objects[name]) {
			continue
		}
		ops = append(ops, clientv3.OpPut(prefix+name, string(objects[name])))
		size += len(prefix) + len(name) + len(objects[name]) + 16
	}
	for _, name := range slices.Sorted(maps.Keys(have)) {
		if _, ok := objects[name]; !ok {
			ops = append(ops, clientv3.OpDelete(prefix+name))
			size += len(prefix) + len(name) + 16
		}
	}
	return ops, size, nil
}

// checkScope accepts ScopeAll and NodeScope of a valid node name.
func checkScope(scope string) error {
	if scope == ScopeAll {
		return nil
	}
	node, ok := strings.CutPrefix(scope, "node/")
	if !ok {
		return fmt.Errorf("scope %q: want %q or node/NAME", scope, ScopeAll)
	}
	return checkName("node", node)
}
