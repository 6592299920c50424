package sysctl

import (
	"context"
	"iter"
	"path/filepath"
	"sort"
	"strings"

	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// The target's plan: what Update, Delete and Prune would change, read from
// the same files they write and decided by the same rules, without
// writing. Every change is "change sysctl NAME: CURRENT -> NEW": a sysctl
// always exists; only its value changes.

var _ reconciler.Planner[*Sysctl] = (*Target)(nil)

// PlanUpdate returns the change Update would make: none when the key
// already has obj's value (compared with normalized whitespace), else
// "change sysctl NAME: CURRENT -> VALUE" (CURRENT is "(write-only)" for a
// key that cannot be read, which Update writes every time). Its errors are
// Update's: an invalid object, a key that does not exist, and the other
// errors of reading it.
func (t *Target) PlanUpdate(ctx context.Context, _ statedb.ReadTxn, obj *Sysctl) (reconciler.Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := obj.Validate(); err != nil {
		return nil, reconciler.Terminal(err)
	}
	path, err := t.path(obj.Name)
	if err != nil {
		return nil, err
	}
	var plan reconciler.Plan
	err = t.ns.Do(func() error {
		plan, err = t.planRead(obj, path)
		return err
	})
	return plan, err
}

// PlanDelete returns the change Delete would make: restoring the value the
// target found before its first change of the key, if it changed the key
// and the key does not hold that value now. A key the target never changed,
// or one that is gone, plans nothing.
func (t *Target) PlanDelete(ctx context.Context, _ statedb.ReadTxn, obj *Sysctl) (reconciler.Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := t.lockLoaded(); err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	return t.planRestore(obj.Name)
}

// PlanPrune returns the changes Prune would make: restoring each key the
// target changed that is not in desired, in name order. Keys it never
// changed are never listed: the target cannot tell a setting made by
// someone else from the kernel's default.
func (t *Target) PlanPrune(ctx context.Context, _ statedb.ReadTxn, desired iter.Seq2[*Sysctl, statedb.Revision]) (reconciler.Plan, error) {
	want := map[string]struct{}{}
	for obj := range desired {
		want[obj.Name] = struct{}{}
	}
	if err := t.lockLoaded(); err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	var stale []string
	for name := range t.original {
		if _, ok := want[name]; !ok {
			stale = append(stale, name)
		}
	}
	sort.Strings(stale)
	var plan reconciler.Plan
	for _, name := range stale {
		if err := ctx.Err(); err != nil {
			return plan, err
		}
		p, err := t.planRestore(name)
		if err != nil {
			return plan, err
		}
		plan = append(plan, p...)
	}
	return plan, nil
}

// planRestore is the plan of restore(name). t.mu is held.
func (t *Target) planRestore(name string) (reconciler.Plan, error) {
	orig, ok := t.original[name]
	if !ok {
		return nil, nil
	}
	path, err := t.path(name)
	if err != nil {
		return nil, err
	}
	var plan reconciler.Plan
	err = t.ns.Do(func() error {
		cur, readable, err := readKey(path)
		switch {
		case err != nil:
			err = classify(name, "reading", path, err)
			if isUnknown(err) {
				return nil // gone: nothing to restore
			}
			return err
		case !readable:
			plan = change(name, "(write-only)", orig)
		case normalize(cur) != normalize(orig):
			plan = change(name, cur, orig)
		}
		return nil
	})
	return plan, err
}

// path returns the file of the key name, with the checks of set.
func (t *Target) path(name string) (string, error) {
	rel, err := keyPath(name)
	if err != nil {
		return "", reconciler.Terminal(err)
	}
	if err := t.checkNetwork(name); err != nil {
		return "", err
	}
	return filepath.Join(t.root, rel), nil
}

// change is the plan of writing value over cur in the key name.
func change(name, cur, value string) reconciler.Plan {
	return reconciler.Plan{{
		Action: reconciler.ActionChange,
		Object: "sysctl " + name,
		Detail: strings.TrimSpace(normalize(cur)) + " -> " + normalize(value),
	}}
}
