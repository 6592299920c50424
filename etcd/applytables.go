package etcd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
// transaction. A table missing from tables is left alone; a table with no
// objects is emptied.
//
// The tables named are read at one revision, and the transaction that
// writes fails with ErrConflict if any of them (changed by this apply or
// not, with a generation in force or none yet) was written in the scope
// since: so when two applies race, each ends with its whole state in
// force or fails, and etcd never holds some tables of one and some of the
// other. A caller that means its state whole (agent fleet apply) reads
// again and retries.
//
// It returns the revision at which the tables named hold exactly the state
// applied: the revision of the transaction that put it in force, or, when
// the state read was already the one applied (nothing to write), the
// latest revision at which any of the named tables changed in the scope
// (0 if none ever did). In that unchanged case nothing is written, so a
// concurrent apply is not refused: the state applied was in force from the
// revision returned through the read, and like any revision returned it
// says when the state went into force, not that no apply came after.
//
// While a rollout is under way or paused (see StartRollout), nothing of the
// desired state may change: ApplyTables fails with ErrRolloutActive, naming
// the rollout, and one that starts between this apply's read and its
// write fails it with ErrConflict.
//
// Other errors: a bad scope, table or object name; more tables than one
// transaction can put in force; an object larger than an etcd request;
// ErrUnknownLayout when the prefix holds a layout version this package
// does not know; etcd's errors (a failed apply leaves the old state in
// force and removes what it staged). When the answer to the last
// transaction is lost (a timeout, a member gone), ApplyTables finds out
// whether it committed, from its apply mark (Layout.ApplyMark) in place
// or its staged generations' numbers, and says so: success means in
// force. Generations older or newer than the one in force, and deltas,
// which an apply or a rollout's start that died before its flip leaves,
// are removed by the next apply that changes the table.
func ApplyTables(ctx context.Context, c *clientv3.Client, l Layout, scope string, tables map[string]map[string][]byte) (int64, error) {
	names, err := checkApply(scope, tables)
	if err != nil {
		return 0, err
	}
	read, err := readInForce(ctx, c, l, scope, names)
	if err != nil {
		return 0, err
	}

	// What changed, and whether it fits in one transaction in place
	// (every changed table has a generation in force).
	var ops []clientv3.Op
	var changed []string
	size, inPlace := 0, true
	for _, table := range names {
		cur := read.cur[table]
		if cur.gen == "" {
			if len(tables[table]) > 0 {
				changed = append(changed, table)
				inPlace = false
			}
			continue
		}
		tops, n, err := inPlaceOps(ctx, c, l.Generation(table, scope, cur.gen), read.rev, tables[table])
		if err != nil {
			return 0, err
		}
		if len(tops) > 0 {
			changed = append(changed, table)
			ops = append(ops, tops...)
			ops = append(ops, clientv3.OpPut(l.Current(table, scope), cur.gen))
			size += n
		}
	}
	if len(changed) == 0 {
		return read.lastMod, nil // nothing to write
	}
	// Generations older than the one in force are garbage (an apply that
	// died between staging and its flip left them): removed with the
	// change; so are those newer and the deltas (see dropStale).
	for _, table := range changed {
		ops = append(ops, dropOlder(l, table, scope, read.cur[table].gen))
		if read.cur[table].gen != "" {
			ops = append(ops, dropStale(l, table, scope, read.cur[table].gen)...)
		}
	}
	mark := newApplyMark()
	ops = append(ops, clientv3.OpPut(l.ApplyMark(scope), mark))
	if inPlace && len(ops)+len(read.versionOps) <= maxTxnOps && size <= maxTxnBytes {
		tr, err := c.Txn(ctx).If(read.guard...).Then(append(ops, read.versionOps...)...).Commit()
		if err == nil && !tr.Succeeded {
			err = fmt.Errorf("%w (a table of %s or the layout version changed since it was read at revision %d)", ErrConflict, scope, read.rev)
		} else if err != nil {
			// The answer was lost: the transaction may have committed.
			// Its mark says whether it did.
			if rev, ok := markInForce(ctx, c, l, scope, mark); ok {
				return rev, nil
			}
		}
		if err != nil {
			return 0, fmt.Errorf("applying in place to %s: %w", scope, err)
		}
		return tr.Header.Revision, nil
	}
	return applyStaged(ctx, c, l, scope, tables, changed, read)
}

// checkApply checks ApplyTables' arguments and returns the table names,
// sorted.
func checkApply(scope string, tables map[string]map[string][]byte) ([]string, error) {
	if err := checkScope(scope); err != nil {
		return nil, err
	}
	names := slices.Sorted(maps.Keys(tables))
	if 3*len(names) > maxTxnOps {
		return nil, fmt.Errorf("%d tables: more than one transaction can put in force", len(names))
	}
	for _, table := range names {
		if err := checkName("table", table); err != nil {
			return nil, err
		}
		for name := range tables[table] {
			if err := checkName("object name", name); err != nil {
				return nil, fmt.Errorf("table %s: %w", table, err)
			}
		}
	}
	return names, nil
}

// inForce is a table's generation in force as read, and its current key's
// ModRevision (0: none yet).
type inForce struct {
	gen string
	mod int64
}

// applyRead is what ApplyTables read at one revision.
type applyRead struct {
	rev     int64
	cur     map[string]inForce
	lastMod int64 // the latest change of any table named
	// guard holds for the write transaction only if no table named was
	// written in the scope since rev, the layout version was not written
	// and no rollout started; versionOps write the version if it was
	// absent.
	guard      []clientv3.Cmp
	versionOps []clientv3.Op
}

// readInForce reads the named tables' generations in force in scope and
// the layout version, in one transaction, and makes the guard of the
// write that follows.
func readInForce(ctx context.Context, c *clientv3.Client, l Layout, scope string, names []string) (applyRead, error) {
	gets := []clientv3.Op{clientv3.OpGet(l.VersionKey()), clientv3.OpGet(l.RolloutActive())}
	for _, table := range names {
		gets = append(gets, clientv3.OpGet(l.Current(table, scope)))
	}
	resp, err := c.Txn(ctx).Then(gets...).Commit()
	if err != nil {
		return applyRead{}, fmt.Errorf("reading the generations in force of %s: %w", scope, err)
	}
	version := resp.Responses[0].GetResponseRange().Kvs
	if err := checkVersion(l, version); err != nil {
		return applyRead{}, err
	}
	if err := rolloutUnderWay(l, resp.Responses[1].GetResponseRange().Kvs); err != nil {
		return applyRead{}, err
	}
	r := applyRead{rev: resp.Header.Revision, cur: map[string]inForce{}}
	r.guard, r.versionOps = versionGuard(l, version)
	// A rollout that starts meanwhile fails the write (no change of the
	// desired state while a rollout runs).
	r.guard = append(r.guard, clientv3.Compare(clientv3.CreateRevision(l.RolloutActive()), "=", 0))
	for i, table := range names {
		var cur inForce
		if kvs := resp.Responses[i+2].GetResponseRange().Kvs; len(kvs) > 0 {
			cur = inForce{gen: string(kvs[0].Value), mod: kvs[0].ModRevision}
			r.lastMod = max(r.lastMod, cur.mod)
		}
		r.cur[table] = cur
		// Every write of a table's scope (Apply's) rewrites its current
		// key; a key that does not exist has ModRevision 0.
		r.guard = append(r.guard, clientv3.Compare(clientv3.ModRevision(l.Current(table, scope)), "=", cur.mod))
	}
	return r, nil
}

// applyStaged stages a new generation of each changed table and puts them
// all in force by one transaction, guarded by read's guard; it removes
// what it staged if that fails, and the old generations if it succeeds.
func applyStaged(ctx context.Context, c *clientv3.Client, l Layout, scope string, tables map[string]map[string][]byte, changed []string, read applyRead) (int64, error) {
	staged := map[string]string{}
	dropStaged := func() {
		cctx, cancel := cleanupCtx(ctx)
		defer cancel()
		for table, gen := range staged {
			c.Delete(cctx, l.Generation(table, scope, gen), clientv3.WithPrefix())
		}
	}
	var flip []clientv3.Op
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
		flip = append(flip, dropStale(l, table, scope, gen)...)
	}
	var rev int64
	tr, err := c.Txn(ctx).If(read.guard...).Then(append(flip, read.versionOps...)...).Commit()
	switch {
	case err == nil && !tr.Succeeded:
		err = fmt.Errorf("%w (a table of %s or the layout version changed since it was read at revision %d, while the new generations were staged)", ErrConflict, scope, read.rev)
	case err == nil:
		rev = tr.Header.Revision
	default:
		// The answer was lost: the flip may have committed. The staged
		// generations' numbers are this apply's alone: if they are in
		// force, it did (and they must stay).
		var ok bool
		if rev, ok = stagedInForce(ctx, c, l, scope, staged); ok {
			err = nil
		}
	}
	if err != nil {
		dropStaged()
		return 0, fmt.Errorf("putting the new generations of %s in force: %w", scope, err)
	}
	// The readers moved on: the generations before the new ones (the old
	// one, and any an apply that died left) go. A failure only leaves
	// garbage behind, which the next apply removes.
	cctx, cancel := cleanupCtx(ctx)
	defer cancel()
	var drops []clientv3.Op
	for _, table := range changed {
		drops = append(drops, dropOlder(l, table, scope, staged[table]))
	}
	c.Txn(cctx).Then(drops...).Commit()
	return rev, nil
}

// dropOlder deletes every generation of table's scope numbered below gen
// (names are zero-padded: they sort by number). A generation below the one
// in force can never be put in force (its flip would conflict): it is
// garbage.
func dropOlder(l Layout, table, scope, gen string) clientv3.Op {
	from := l.Scope(table, scope) + "gen/"
	return clientv3.OpDelete(from, clientv3.WithRange(from+gen))
}

// dropStale deletes what a writer that died before its flip or its
// rollout's start left of table's scope: the generations numbered above
// gen (the one the transaction puts in force) and, in scope all, every
// delta. In a transaction that writes the table's current key under
// readInForce's guard it deletes nothing in use: no rollout is under way
// (its generations and deltas are in use), and a concurrent apply or
// rollout that staged one of them fails its flip or its start (the
// current key changed) and drops what it staged.
func dropStale(l Layout, table, scope, gen string) []clientv3.Op {
	from := l.Scope(table, scope) + "gen/"
	ops := []clientv3.Op{clientv3.OpDelete(clientv3.GetPrefixRangeEnd(from+gen+"/"), clientv3.WithRange(clientv3.GetPrefixRangeEnd(from)))}
	if scope == ScopeAll {
		ops = append(ops, clientv3.OpDelete(l.Scope(table, scope)+"delta/", clientv3.WithPrefix()))
	}
	return ops
}

// newApplyMark is a value no other apply writes.
func newApplyMark() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// markInForce tells, after an in-place apply's answer was lost, whether its
// transaction committed: the scope's apply mark is its own; then also at
// which revision.
func markInForce(ctx context.Context, c *clientv3.Client, l Layout, scope, mark string) (int64, bool) {
	cctx, cancel := cleanupCtx(ctx)
	defer cancel()
	resp, err := c.Get(cctx, l.ApplyMark(scope))
	if err != nil || len(resp.Kvs) == 0 || string(resp.Kvs[0].Value) != mark {
		return 0, false
	}
	return resp.Kvs[0].ModRevision, true
}

// stagedInForce tells, after a flip's answer was lost, whether it
// committed: every staged generation is in force; then also at which
// revision.
func stagedInForce(ctx context.Context, c *clientv3.Client, l Layout, scope string, staged map[string]string) (int64, bool) {
	cctx, cancel := cleanupCtx(ctx)
	defer cancel()
	var gets []clientv3.Op
	tables := slices.Sorted(maps.Keys(staged))
	for _, table := range tables {
		gets = append(gets, clientv3.OpGet(l.Current(table, scope)))
	}
	resp, err := c.Txn(cctx).Then(gets...).Commit()
	if err != nil {
		return 0, false
	}
	var rev int64
	for i, table := range tables {
		kvs := resp.Responses[i].GetResponseRange().Kvs
		if len(kvs) == 0 || string(kvs[0].Value) != staged[table] {
			return 0, false
		}
		rev = kvs[0].ModRevision
	}
	return rev, true
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
