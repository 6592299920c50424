package sysctl

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/steadystate/steadystate/examples/netnsutil"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// DefaultProcSysRoot is where the kernel exposes its sysctls.
const DefaultProcSysRoot = "/proc/sys"

// TargetConfig configures a Target. The zero value manages /proc/sys of the
// process's own network namespace.
type TargetConfig struct {
	// ProcSysRoot is the directory that holds the sysctl tree. Default
	// DefaultProcSysRoot; tests point it at a temporary directory.
	ProcSysRoot string
	// NetNS is the network namespace whose net.* sysctls are managed: the
	// path of a namespace file (/var/run/netns/NAME, /proc/PID/ns/net) or
	// the name of one under /var/run/netns. "" is the process's own. It is
	// entered at each operation, so it may be created after NewTarget.
	NetNS string
	// NetworkOnly restricts the target to net.* sysctls, which belong to
	// the network namespace. Any other key (kernel.*, vm.*, fs.*) is the
	// whole machine's, whatever namespace the target works in: set this
	// whenever the target must not change the host (the example agent's
	// sandbox). Such a key is then a terminal error on its object.
	NetworkOnly bool
	// Originals, when set, keeps the original values durably: the target
	// loads what an earlier target (an earlier run of the program)
	// recorded at its first operation (so the store may be opened after
	// NewTarget, at a program's start), so that Delete and Prune restore
	// keys it changed; each original is saved before the key is first
	// written and forgotten only after it was restored. nil keeps them in
	// memory only. A failing load is the error of each operation until
	// one succeeds.
	Originals OriginalStore
	// CheckInterval is how often the target checks that the keys it
	// applied still have their values, so that the reconciler repairs a
	// key changed behind its back (see watch.go). Default
	// DefaultCheckInterval; negative: never (only the reconciler's refresh
	// by age, RefreshInterval, repairs such a change).
	CheckInterval time.Duration
}

// OriginalStore is a durable record of original sysctl values (see
// TargetConfig.Originals). The Target calls it with its lock held, one
// call at a time.
type OriginalStore interface {
	// LoadOriginals returns every recorded original, by name.
	LoadOriginals() (map[string]string, error)
	// SaveOriginal records the original value of name; it must be durable
	// when it returns.
	SaveOriginal(name, value string) error
	// ForgetOriginal drops the record of name.
	ForgetOriginal(name string) error
}

// Target writes desired sysctls to the sysctl tree. It implements
// reconciler.Target[*Sysctl], reconciler.Planner[*Sysctl] (plan.go), and
// reconciler.BatchPlanner[*Sysctl] and reconciler.DriftTarget[*Sysctl]
// (watch.go), and is safe for concurrent use.
type Target struct {
	root        string
	ns          netnsutil.NS
	networkOnly bool

	// writeFile writes one key; a field so that tests can count writes.
	writeFile func(path, value string) error

	checkEvery time.Duration // TargetConfig.CheckInterval with its default
	applied    appliedKeys   // what the drift check compares (watch.go)
	checks     atomic.Uint64 // drift checks made

	mu sync.Mutex
	// original holds, per name, the value found before the target's first
	// change of that key (by this target or, with a store, an earlier
	// one). An entry exists from just before the first write of the key
	// until its original is restored; store mirrors it.
	original map[string]string
	store    OriginalStore
	loaded   bool // store's originals are in original
}

var _ reconciler.Target[*Sysctl] = (*Target)(nil)

// NewTarget returns a target for cfg. Its error wraps ErrInvalidConfig
// for a NetNS that cannot name a namespace ("..").
func NewTarget(cfg TargetConfig) (*Target, error) {
	if cfg.ProcSysRoot == "" {
		cfg.ProcSysRoot = DefaultProcSysRoot
	}
	if cfg.CheckInterval == 0 {
		cfg.CheckInterval = DefaultCheckInterval
	}
	ns, err := netnsutil.Resolve(cfg.NetNS)
	if err != nil {
		return nil, fmt.Errorf("%w: NetNS: %w", ErrInvalidConfig, err)
	}
	return &Target{
		root:        cfg.ProcSysRoot,
		ns:          ns,
		networkOnly: cfg.NetworkOnly,
		writeFile:   writeKey,
		original:    map[string]string{},
		store:       cfg.Originals,
		loaded:      cfg.Originals == nil,
		checkEvery:  cfg.CheckInterval,
	}, nil
}

// lockLoaded locks t.mu and loads the store's originals if not yet done.
// On error t.mu is unlocked.
func (t *Target) lockLoaded() error {
	t.mu.Lock()
	if t.loaded {
		return nil
	}
	m, err := t.store.LoadOriginals()
	if err != nil {
		t.mu.Unlock()
		return fmt.Errorf("sysctl target: loading the recorded original values: %w", err)
	}
	for k, v := range m {
		t.original[k] = v
	}
	t.loaded = true
	return nil
}

// Update writes obj's value unless the key already has it (compared with
// normalized whitespace). Before the first change of a key it records the
// current value, for Delete and Prune to restore. An invalid object, an
// unknown key, a read-only key and a value the kernel rejects are terminal
// errors (reconciler.Terminal); other I/O errors are returned as they are
// and retried.
func (t *Target) Update(ctx context.Context, _ statedb.ReadTxn, obj *Sysctl) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := obj.Validate(); err != nil {
		return reconciler.Terminal(err)
	}
	if err := t.lockLoaded(); err != nil {
		return err
	}
	defer t.mu.Unlock()
	if err := t.set(obj.Name, obj.Value, true); err != nil {
		t.applied.forget(obj.Name)
		return err
	}
	if path, err := t.path(obj.Name); err == nil {
		t.applied.set(obj.Name, path, obj.Value)
	}
	return nil
}

// Delete restores the value found before the target's first change of the
// key, if it changed it, and forgets that value. A key the target never
// changed is left alone. Errors are those of Update; an unknown key is not
// an error (there is nothing to restore).
func (t *Target) Delete(ctx context.Context, _ statedb.ReadTxn, obj *Sysctl) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := t.lockLoaded(); err != nil {
		return err
	}
	defer t.mu.Unlock()
	return t.restore(obj.Name)
}

// Prune restores the original value of every key the target changed that
// is not in desired. Keys it never changed are never touched. The error
// joins the failures of the individual keys.
func (t *Target) Prune(ctx context.Context, _ statedb.ReadTxn, desired iter.Seq2[*Sysctl, statedb.Revision]) error {
	want := map[string]struct{}{}
	for obj := range desired {
		want[obj.Name] = struct{}{}
	}
	if err := t.lockLoaded(); err != nil {
		return err
	}
	defer t.mu.Unlock()
	var stale []string
	for name := range t.original {
		if _, ok := want[name]; !ok {
			stale = append(stale, name)
		}
	}
	sort.Strings(stale)
	var errs []error
	for _, name := range stale {
		if err := ctx.Err(); err != nil {
			return errors.Join(append(errs, err)...)
		}
		errs = append(errs, t.restore(name))
	}
	return errors.Join(errs...)
}

// Originals returns a copy of the recorded original values of the keys the
// target has changed (or an earlier target with the same store), by name:
// what Delete and Prune would restore.
func (t *Target) Originals() map[string]string {
	if t.lockLoaded() != nil {
		t.mu.Lock() // what is known in memory
	}
	defer t.mu.Unlock()
	m := make(map[string]string, len(t.original))
	for k, v := range t.original {
		m[k] = v
	}
	return m
}

// restore writes back the original value of name, if recorded, and
// forgets it. t.mu is held.
func (t *Target) restore(name string) error {
	t.applied.forget(name)
	orig, ok := t.original[name]
	if !ok {
		return nil
	}
	err := t.set(name, orig, false)
	if err == nil || errors.Is(err, errUnknownKey) {
		// Gone keys (an interface that was removed) have nothing left to
		// restore.
		if t.store != nil {
			if err := t.store.ForgetOriginal(name); err != nil {
				return fmt.Errorf("sysctl %s: restored, but forgetting its original failed: %w", name, err)
			}
		}
		delete(t.original, name)
		return nil
	}
	return err
}

// set writes value to name unless it is there already. With record, the
// value found before the first change is kept in t.original, and saved in
// the store before the write, so that a crash right after the write
// cannot lose it. t.mu is held.
func (t *Target) set(name, value string, record bool) error {
	path, err := t.path(name)
	if err != nil {
		return err
	}
	return t.ns.Do(func() error {
		cur, readable, err := readKey(path)
		if err != nil {
			return classify(name, "reading", path, err)
		}
		if readable && normalize(cur) == normalize(value) {
			return nil
		}
		if _, seen := t.original[name]; record && readable && !seen {
			orig := strings.TrimRight(cur, "\n")
			if t.store != nil {
				if err := t.store.SaveOriginal(name, orig); err != nil {
					return fmt.Errorf("sysctl %s: recording its original value %q: %w", name, orig, err)
				}
			}
			t.original[name] = orig
		}
		if err := t.writeFile(path, value); err != nil {
			return classify(name, "writing", path, err)
		}
		return nil
	})
}

// checkNetwork refuses a key outside net.* on a NetworkOnly target.
func (t *Target) checkNetwork(name string) error {
	if t.networkOnly && !strings.HasPrefix(name, "net.") {
		return reconciler.Terminal(fmt.Errorf("%w: %s is not a network-namespace sysctl (not net.*): changing it would change the whole machine, which this target may not do", ErrNotNetwork, name))
	}
	return nil
}

// isUnknown reports whether err (of classify) says the key does not exist.
func isUnknown(err error) bool { return errors.Is(err, errUnknownKey) }

// readKey reads a key. A write-only key (such as net.ipv4.route.flush)
// yields readable=false and no error: it is written every time and its
// value cannot be restored.
func readKey(path string) (value string, readable bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrPermission) {
		if _, serr := os.Stat(path); serr == nil {
			return "", false, nil
		}
	}
	if err != nil {
		return "", false, err
	}
	return string(b), true, nil
}

// writeKey writes one key in a single write(2), as the kernel expects.
func writeKey(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value + "\n")
	return errors.Join(err, f.Close())
}

// classify turns an I/O error into a clear error on the object, terminal
// when retrying cannot help.
func classify(name, op, path string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return reconciler.Terminal(fmt.Errorf("sysctl %s: %w: %s does not exist", name, errUnknownKey, path))
	case errors.Is(err, syscall.EISDIR):
		return reconciler.Terminal(fmt.Errorf("sysctl %s: %w: %s is a directory, not a key", name, errUnknownKey, path))
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return reconciler.Terminal(fmt.Errorf("sysctl %s is read-only: %s %s: %w", name, op, path, err))
	case errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.ERANGE):
		return reconciler.Terminal(fmt.Errorf("sysctl %s: the kernel rejected the value: %w", name, err))
	}
	return fmt.Errorf("sysctl %s: %s %s: %w", name, op, path, err)
}
