package etcd

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcd's default limits: operations per transaction and bytes per request
// (--max-txn-ops 128, --max-request-bytes 1.5 MiB). Apply stays well
// inside both.
const (
	maxTxnOps   = 128
	maxTxnBytes = 1 << 20
)

// ErrConflict is wrapped by Apply's error when another Apply of the same
// table and scope put its generation in force first; nothing of this one
// is left behind.
var ErrConflict = errors.New("another apply of the same scope came first")

// Apply replaces the desired objects of table's scope with objects (name →
// value) and returns the etcd revision at which the new state is in force.
// A change that fits in one transaction (up to 127 objects changed, added
// or removed) is made in place, in one transaction: the nodes receive just
// those objects. A larger one is staged as a new generation (in as many
// transactions as etcd's limits need), then put in force in one
// transaction, then the old generation is deleted; the nodes read the new
// generation whole. Either way readers (Source) see the old or the new
// state whole, and the last transaction fails with ErrConflict if another
// Apply of the scope came in between. An empty objects removes every
// object of the scope; an unchanged state writes nothing.
func Apply(ctx context.Context, c *clientv3.Client, l Layout, table, scope string, objects map[string][]byte) (int64, error) {
	if err := checkName("table", table); err != nil {
		return 0, err
	}
	for name := range objects {
		if err := checkName("object name", name); err != nil {
			return 0, err
		}
	}
	current := l.Current(table, scope)
	resp, err := c.Get(ctx, current)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", current, err)
	}
	var oldGen string
	var oldMod int64
	if len(resp.Kvs) > 0 {
		oldGen, oldMod = string(resp.Kvs[0].Value), resp.Kvs[0].ModRevision
	}
	if oldGen != "" {
		rev, done, err := applyInPlace(ctx, c, l, table, scope, oldGen, oldMod, resp.Header.Revision, objects)
		if done || err != nil {
			return rev, err
		}
	}
	gen, err := nextGeneration(ctx, c, l, table, scope)
	if err != nil {
		return 0, err
	}
	prefix := l.Generation(table, scope, gen)
	if err := stage(ctx, c, prefix, objects); err != nil {
		c.Delete(context.WithoutCancel(ctx), prefix, clientv3.WithPrefix())
		return 0, err
	}
	// Put the new generation in force if the old one still is.
	cmp := clientv3.Compare(clientv3.ModRevision(current), "=", oldMod)
	flip, err := c.Txn(ctx).If(cmp).Then(clientv3.OpPut(current, gen)).Commit()
	if err == nil && !flip.Succeeded {
		err = fmt.Errorf("%w (%s changed while %s was staged)", ErrConflict, current, gen)
	}
	if err != nil {
		c.Delete(context.WithoutCancel(ctx), prefix, clientv3.WithPrefix())
		return 0, fmt.Errorf("putting %s in force: %w", gen, err)
	}
	if oldGen != "" {
		// The readers moved on; a failure only leaves garbage behind.
		c.Delete(ctx, l.Generation(table, scope, oldGen), clientv3.WithPrefix())
	}
	return flip.Header.Revision, nil
}

// applyInPlace applies a change small enough for one transaction to the
// generation in force: the changed and new objects put, the removed ones
// deleted, and the current pointer rewritten with the same generation (so
// that a concurrent Apply's comparison fails), all in one transaction. It
// returns done=false, writing nothing, when the change is too large; an
// unchanged state writes nothing and returns the revision read.
func applyInPlace(ctx context.Context, c *clientv3.Client, l Layout, table, scope, gen string, mod, readRev int64, objects map[string][]byte) (int64, bool, error) {
	prefix := l.Generation(table, scope, gen)
	have := map[string][]byte{}
	resp, err := c.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(readRev))
	if err != nil {
		return 0, false, fmt.Errorf("reading %s: %w", prefix, err)
	}
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
	switch {
	case len(ops) == 0:
		return readRev, true, nil
	case len(ops) > maxTxnOps-1 || size > maxTxnBytes:
		return 0, false, nil
	}
	current := l.Current(table, scope)
	ops = append(ops, clientv3.OpPut(current, gen))
	tr, err := c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(current), "=", mod)).Then(ops...).Commit()
	if err == nil && !tr.Succeeded {
		err = fmt.Errorf("%w (%s changed meanwhile)", ErrConflict, current)
	}
	if err != nil {
		return 0, true, fmt.Errorf("applying in place to %s: %w", gen, err)
	}
	return tr.Header.Revision, true, nil
}

// nextGeneration takes a new generation number for the scope: an
// increment of its counter key that only one caller can win.
func nextGeneration(ctx context.Context, c *clientv3.Client, l Layout, table, scope string) (string, error) {
	counter := l.Scope(table, scope) + "next"
	for {
		resp, err := c.Get(ctx, counter)
		if err != nil {
			return "", fmt.Errorf("reading %s: %w", counter, err)
		}
		var n uint64
		var mod int64
		if len(resp.Kvs) > 0 {
			n, mod = parseGen(string(resp.Kvs[0].Value)), resp.Kvs[0].ModRevision
		}
		gen := genName(n + 1)
		tr, err := c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(counter), "=", mod)).
			Then(clientv3.OpPut(counter, gen)).Commit()
		if err != nil {
			return "", fmt.Errorf("taking a generation: %w", err)
		}
		if tr.Succeeded {
			return gen, nil
		}
	}
}

// stage writes the objects under prefix in transactions within etcd's
// limits, in name order.
func stage(ctx context.Context, c *clientv3.Client, prefix string, objects map[string][]byte) error {
	var ops []clientv3.Op
	size := 0
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		if _, err := c.Txn(ctx).Then(ops...).Commit(); err != nil {
			return fmt.Errorf("staging under %s: %w", prefix, err)
		}
		ops, size = ops[:0], 0
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(objects)) {
		v := objects[name]
		n := len(prefix) + len(name) + len(v) + 16
		if n > maxTxnBytes {
			return fmt.Errorf("object %q: %d bytes is more than one etcd request may hold", name, len(v))
		}
		if len(ops) == maxTxnOps-1 || size+n > maxTxnBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		ops = append(ops, clientv3.OpPut(prefix+name, string(v)))
		size += n
	}
	return flush()
}
