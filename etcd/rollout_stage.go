package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// tableDiff is what a rollout changes in one table: the objects it puts
// (new or with another value) and the names it removes, over the
// generation in force (old; "" for none).
type tableDiff struct {
	table string
	old   string
	puts  map[string][]byte
	dels  []string
	all   map[string][]byte // the table's whole new state
}

// diffTables compares each table named with its generation in force as
// read, and returns the tables that change.
func diffTables(ctx context.Context, c *clientv3.Client, l Layout, tables map[string]map[string][]byte, names []string, read applyRead) ([]tableDiff, error) {
	var out []tableDiff
	for _, table := range names {
		d := tableDiff{table: table, old: read.cur[table].gen, puts: map[string][]byte{}, all: tables[table]}
		have := map[string][]byte{}
		if d.old != "" {
			prefix := l.Generation(table, ScopeAll, d.old)
			resp, err := c.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(read.rev))
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", prefix, err)
			}
			for _, kv := range resp.Kvs {
				have[string(kv.Key[len(prefix):])] = kv.Value
			}
		}
		for name, v := range tables[table] {
			if old, ok := have[name]; !ok || string(old) != string(v) {
				d.puts[name] = v
			}
		}
		for _, name := range slices.Sorted(maps.Keys(have)) {
			if _, ok := tables[table][name]; !ok {
				d.dels = append(d.dels, name)
			}
		}
		if len(d.puts)+len(d.dels) > 0 {
			out = append(out, d)
		}
	}
	return out, nil
}

// asDeltas tells whether the changes are small enough to roll out as
// deltas: the transaction that finishes the rollout writes them into the
// generations in force, beside each table's current key, pins and delta
// (three operations), the history and the rollout's keys, within etcd's
// limits (half the bytes: the rollout's state goes in too).
func asDeltas(l Layout, diffs []tableDiff) bool {
	ops, size := 8+3*len(diffs), 0
	for _, d := range diffs {
		prefix := l.Generation(d.table, ScopeAll, genName(1))
		ops += len(d.puts) + len(d.dels)
		for name, v := range d.puts {
			size += len(prefix) + len(name) + len(v) + 16
		}
		for _, name := range d.dels {
			size += len(prefix) + len(name) + 16
		}
	}
	return ops <= maxTxnOps && size <= maxTxnBytes/2
}

// stagedRollout is what StartRollout staged: dropped if it does not start.
type stagedRollout struct {
	c      *clientv3.Client
	l      Layout
	staged []RolloutTable // what was written: New names each generation or delta
}

// stage writes the change of each changed table, not in force (as deltas
// when asDeltas, else as new generations), and fills r.Tables; it returns
// the operations the start transaction adds: the empty generation put in
// force for a changed table with none.
func (s *stagedRollout) stage(ctx context.Context, r *Rollout, tables map[string]map[string][]byte, diffs []tableDiff) ([]clientv3.Op, error) {
	deltas := asDeltas(s.l, diffs)
	var ops []clientv3.Op
	for _, d := range diffs {
		t := RolloutTable{Table: d.table, Old: d.old}
		var err error
		if t.Old == "" {
			// Nothing in force: an empty generation is, from the start,
			// so that a rollback has a current key to rewrite.
			if t.Old, err = nextGeneration(ctx, s.c, s.l, d.table, ScopeAll); err != nil {
				return nil, err
			}
			s.staged = append(s.staged, RolloutTable{Table: d.table, New: t.Old})
			ops = append(ops, clientv3.OpPut(s.l.Current(d.table, ScopeAll), t.Old))
		}
		gen, err := nextGeneration(ctx, s.c, s.l, d.table, ScopeAll)
		if err != nil {
			return nil, err
		}
		prefix, objects := s.l.Generation(d.table, ScopeAll, gen), d.all
		t.New = gen
		if deltas {
			t.New = deltaName(parseGen(gen))
			prefix, objects = s.l.Delta(d.table, t.New), map[string][]byte{}
			for name, v := range d.puts {
				objects["put/"+name] = v
			}
			for _, name := range d.dels {
				objects["del/"+name] = nil
			}
		}
		s.staged = append(s.staged, RolloutTable{Table: d.table, New: t.New})
		if err := stage(ctx, s.c, prefix, objects); err != nil {
			return nil, err
		}
		r.Tables = append(r.Tables, t)
	}
	return ops, nil
}

// drop deletes what stage wrote.
func (s *stagedRollout) drop(ctx context.Context) {
	cctx, cancel := cleanupCtx(ctx)
	defer cancel()
	for _, g := range s.staged {
		s.c.Delete(cctx, stagedPrefix(s.l, g.Table, g.New), clientv3.WithPrefix())
	}
}

// referenced tells whether the rollout under way (as read now) names
// what was staged, or might: a state that does not parse, or etcd that
// does not answer, might.
func (s *stagedRollout) referenced(ctx context.Context) bool {
	cctx, cancel := cleanupCtx(ctx)
	defer cancel()
	resp, err := s.c.Get(cctx, s.l.RolloutActive())
	if err != nil {
		return true
	}
	if len(resp.Kvs) == 0 {
		return false
	}
	var r Rollout
	if json.Unmarshal(resp.Kvs[0].Value, &r) != nil {
		return true
	}
	for _, g := range s.staged {
		for _, t := range r.Tables {
			if t.Table == g.Table && (t.New == g.New || t.Old == g.New) {
				return true
			}
		}
	}
	return false
}

// stagedPrefix is the prefix of a rollout's generation or delta.
func stagedPrefix(l Layout, table, name string) string {
	if isDelta(name) {
		return l.Delta(table, name)
	}
	return l.Generation(table, ScopeAll, name)
}
