package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// LayoutVersion is the version of the key layout this package writes,
// kept under Layout.VersionKey. It reads versions 1 (before the version
// key existed: no node records) and 2 (no pins, no rollouts) too, which
// read as version 3 without them (see the package doc).
const LayoutVersion = 3

// ErrUnknownLayout is wrapped by the error of CheckLayout, Fleet and
// ApplyTables when the prefix holds a layout version this package does not
// know (a newer steadystate wrote it): they refuse rather than misread it.
var ErrUnknownLayout = errors.New("unknown key layout version")

// CheckLayout reads the layout version under l's prefix. It is nil when
// the version is one this package reads (2 or LayoutVersion) or absent
// (nothing written yet, or written by a steadystate before version 2,
// which reads the same); otherwise an error wrapping ErrUnknownLayout
// that names the key and the versions. An agent calls it before it reads
// or writes anything of the fleet.
func CheckLayout(ctx context.Context, c *clientv3.Client, l Layout) error {
	if c == nil {
		return errors.New("layout check: client is nil")
	}
	resp, err := c.Get(ctx, l.VersionKey())
	if err != nil {
		return fmt.Errorf("reading the layout version %s: %w", l.VersionKey(), err)
	}
	return checkVersion(l, resp.Kvs)
}

// checkVersion checks the layout version key as read (kvs: none or one).
func checkVersion(l Layout, kvs []*mvccpb.KeyValue) error {
	if len(kvs) == 0 {
		return nil
	}
	switch v := string(kvs[0].Value); v {
	case "2", strconv.Itoa(LayoutVersion):
		return nil
	default:
		return fmt.Errorf("%w: %s holds %q, this program knows versions 1 to %d only (upgrade it to one that knows the fleet's layout)",
			ErrUnknownLayout, l.VersionKey(), v, LayoutVersion)
	}
}

// versionGuard returns what a write transaction needs for the layout
// version as read (kvs): when it was present, a compare that it was not
// written since (a migration meanwhile fails the transaction), the
// version kept as it is; when it was absent, an operation that writes
// LayoutVersion unless another writer did meanwhile (so that concurrent
// first writes of other scopes do not conflict).
func versionGuard(l Layout, kvs []*mvccpb.KeyValue) ([]clientv3.Cmp, []clientv3.Op) {
	if len(kvs) > 0 {
		return []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(l.VersionKey()), "=", kvs[0].ModRevision)}, nil
	}
	return nil, []clientv3.Op{writeVersion(l)}
}

// writeVersion writes the layout version if the key is absent: a nested
// transaction, so that it never fails the one it is part of.
func writeVersion(l Layout) clientv3.Op {
	key := l.VersionKey()
	return clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)},
		[]clientv3.Op{clientv3.OpPut(key, strconv.Itoa(LayoutVersion))}, nil)
}
