package sysctl

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// The target as a reconciler.DriftTarget. The kernel says nothing when a
// sysctl is written, so the target checks the keys it applied every
// TargetConfig.CheckInterval (DefaultCheckInterval): one read of each of
// their files, in one entry into the namespace, compared with the value it
// applied. Each key that differs, or cannot be read any more, is reported,
// and the reconciler repairs it at once; a key that still has its value
// costs its read and nothing else.
//
// The keys checked are those the target applied (Update) or found applied
// (a plan without change, as after a restart): not a key that failed, which
// the reconciler retries on its own, nor one it restored (Delete, Prune).

// DefaultCheckInterval is how often the target checks the keys it applied
// by default (TargetConfig.CheckInterval).
const DefaultCheckInterval = 5 * time.Second

var (
	_ reconciler.DriftTarget[*Sysctl]  = (*Target)(nil)
	_ reconciler.BatchPlanner[*Sysctl] = (*Target)(nil)
)

// appliedKeys is what the check compares: the value applied to each key,
// with the key's file. Its own mutex, so that a check never waits for an
// operation.
type appliedKeys struct {
	mu   sync.Mutex
	keys map[string]appliedKey // by name
}

type appliedKey struct{ path, value string }

func (a *appliedKeys) set(name, path, value string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.keys == nil {
		a.keys = map[string]appliedKey{}
	}
	a.keys[name] = appliedKey{path, value}
}

func (a *appliedKeys) forget(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.keys, name)
}

func (a *appliedKeys) snapshot() map[string]appliedKey {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.keys)
}

// WatchDrift implements reconciler.DriftTarget: it checks the applied keys
// every CheckInterval until ctx ends (nil). With a negative CheckInterval
// it checks nothing and only waits for ctx. It fails when the namespace
// cannot be entered.
func (t *Target) WatchDrift(ctx context.Context, drift reconciler.Drift) error {
	if t.checkEvery < 0 {
		<-ctx.Done()
		return nil
	}
	drift.ChangedAll() // what changed before is unknown
	tick := time.NewTicker(t.checkEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if err := t.checkApplied(drift); err != nil {
				return err
			}
		}
	}
}

// checkApplied reads every applied key and reports those that differ.
func (t *Target) checkApplied(drift reconciler.Drift) error {
	keys := t.applied.snapshot()
	if len(keys) == 0 {
		return nil
	}
	var changed []string
	err := t.ns.Do(func() error {
		for name, k := range keys {
			cur, readable, err := readKey(k.path)
			switch {
			case err != nil:
				changed = append(changed, name) // gone, or unreadable: the check says why
			case readable && normalize(cur) != normalize(k.value):
				changed = append(changed, name)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sysctl target: checking the applied keys: %w", err)
	}
	t.checks.Add(1)
	for _, name := range changed {
		drift.Changed(index.String(name))
	}
	return nil
}

// PlanUpdateBatch implements reconciler.BatchPlanner: each entry gets
// PlanUpdate's plan and error, for one entry into the namespace.
func (t *Target) PlanUpdateBatch(ctx context.Context, _ statedb.ReadTxn, batch []reconciler.PlanEntry[*Sysctl]) {
	type read struct {
		path string
		i    int
	}
	var reads []read
	for i := range batch {
		e := &batch[i]
		e.Plan, e.Result = nil, nil
		if err := ctx.Err(); err != nil {
			e.Result = err
			continue
		}
		if err := e.Object.Validate(); err != nil {
			e.Result = reconciler.Terminal(err)
			continue
		}
		path, err := t.path(e.Object.Name)
		if err != nil {
			e.Result = err
			continue
		}
		reads = append(reads, read{path, i})
	}
	err := t.ns.Do(func() error {
		for _, r := range reads {
			e := &batch[r.i]
			e.Plan, e.Result = t.planRead(e.Object, r.path)
		}
		return nil
	})
	if err != nil {
		for _, r := range reads {
			batch[r.i].Result = err
		}
	}
}

// planRead is the plan of writing obj's value to its file at path, read
// in the namespace. A key found with its value is recorded as applied.
func (t *Target) planRead(obj *Sysctl, path string) (reconciler.Plan, error) {
	cur, readable, err := readKey(path)
	switch {
	case err != nil:
		return nil, classify(obj.Name, "reading", path, err)
	case !readable:
		return change(obj.Name, "(write-only)", obj.Value), nil
	case normalize(cur) != normalize(obj.Value):
		return change(obj.Name, cur, obj.Value), nil
	}
	t.applied.set(obj.Name, path, obj.Value)
	return nil, nil
}

// Checks returns how many times the target has checked its applied keys.
func (t *Target) Checks() uint64 { return t.checks.Load() }
