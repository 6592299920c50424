package etcd

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ReclaimWait is reclaimWait, for the tests.
var ReclaimWait = reclaimWait

// RolloutWait is a rollout store's wait, for the tests.
func RolloutWait(ctx context.Context, c *clientv3.Client, l Layout, after int64) error {
	return (&etcdStore{c: c, l: l}).wait(ctx, after)
}
