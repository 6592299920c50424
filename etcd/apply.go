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

// ErrConflict is wrapped by the error of Apply and ApplyTables when
// another apply wrote one of the tables named in the same scope between
// this one's read and its commit; nothing of this one is left behind.
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
// apply of the table's scope came in between. An empty objects removes
// every object of the scope; an unchanged state writes nothing and returns
// the revision of the scope's last change. It is ApplyTables of one table
// (whose doc lists the errors).
func Apply(ctx context.Context, c *clientv3.Client, l Layout, table, scope string, objects map[string][]byte) (int64, error) {
	return ApplyTables(ctx, c, l, scope, map[string]map[string][]byte{table: objects})
}

// nextGeneration takes a new generation number for the scope: an
// increment of its counter key that only one caller can win. It is a
// staged apply's first write: it writes the layout version too if absent.
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
			Then(clientv3.OpPut(counter, gen), writeVersion(l)).Commit()
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
