package sysctl

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// fakeRoot makes a sysctl tree in a temporary directory with the given
// keys and returns a target on it that counts its writes.
func fakeRoot(t *testing.T, keys map[string]string) (*Target, string, *int) {
	t.Helper()
	root := t.TempDir()
	for name, v := range keys {
		rel, err := keyPath(name)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tg := mustTarget(t, TargetConfig{ProcSysRoot: root})
	writes := new(int)
	tg.writeFile = func(path, value string) error { *writes++; return writeKey(path, value) }
	return tg, root, writes
}

func readFake(t *testing.T, root, name string) string {
	t.Helper()
	rel, _ := keyPath(name)
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mustTarget returns NewTarget(cfg) or fails the test.
func mustTarget(t *testing.T, cfg TargetConfig) *Target {
	t.Helper()
	tg, err := NewTarget(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func TestNewTarget(t *testing.T) {
	if tg := mustTarget(t, TargetConfig{}); tg.root != DefaultProcSysRoot || tg.ns != "" {
		t.Errorf("defaults: root %q ns %q", tg.root, tg.ns)
	}
	if tg := mustTarget(t, TargetConfig{NetNS: "blue"}); tg.ns != "/var/run/netns/blue" {
		t.Errorf("NetNS blue: ns %q, want the named namespace's path", tg.ns)
	}
	if tg := mustTarget(t, TargetConfig{NetNS: "/proc/1/ns/net"}); tg.ns != "/proc/1/ns/net" {
		t.Errorf("NetNS /proc/1/ns/net: ns %q", tg.ns)
	}
	if _, err := NewTarget(TargetConfig{NetNS: ".."}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NetNS ..: %v, want ErrInvalidConfig", err)
	}
}

func TestUpdateSkipsNoopAndDeleteRestores(t *testing.T) {
	ctx := context.Background()
	tg, root, writes := fakeRoot(t, map[string]string{
		"net.ipv4.ip_forward": "0",
		"net.ipv4.tcp_rmem":   "4096\t87380\t6291456",
	})

	// Already at the desired value (whitespace differs): no write.
	if err := tg.Update(ctx, nil, &Sysctl{Name: "net.ipv4.tcp_rmem", Value: "4096 87380  6291456"}); err != nil {
		t.Fatal(err)
	}
	if *writes != 0 {
		t.Fatalf("%d writes for a value that was already set", *writes)
	}
	// A change writes once, records the original, and repeating it is a
	// no-op.
	for range 3 {
		if err := tg.Update(ctx, nil, &Sysctl{Name: "net.ipv4.ip_forward", Value: "1"}); err != nil {
			t.Fatal(err)
		}
	}
	if *writes != 1 || readFake(t, root, "net.ipv4.ip_forward") != "1\n" {
		t.Fatalf("writes=%d value=%q, want 1 write of 1", *writes, readFake(t, root, "net.ipv4.ip_forward"))
	}
	// A second change keeps the first original.
	if err := tg.Update(ctx, nil, &Sysctl{Name: "net.ipv4.ip_forward", Value: "2"}); err != nil {
		t.Fatal(err)
	}
	if got := tg.Originals(); len(got) != 1 || got["net.ipv4.ip_forward"] != "0" {
		t.Fatalf("originals = %q", got)
	}
	// Delete restores the value found before the first change, once.
	if err := tg.Delete(ctx, nil, &Sysctl{Name: "net.ipv4.ip_forward", Value: "2"}); err != nil {
		t.Fatal(err)
	}
	if v := readFake(t, root, "net.ipv4.ip_forward"); normalize(v) != "0" {
		t.Fatalf("after Delete value = %q, want 0", v)
	}
	if len(tg.Originals()) != 0 {
		t.Fatalf("original not forgotten: %v", tg.Originals())
	}
	// Deleting a key it never changed touches nothing.
	n := *writes
	if err := tg.Delete(ctx, nil, &Sysctl{Name: "net.ipv4.tcp_rmem", Value: "1 2 3"}); err != nil {
		t.Fatal(err)
	}
	if *writes != n {
		t.Fatalf("Delete of an unchanged key wrote")
	}
}

func TestUpdateErrors(t *testing.T) {
	ctx := context.Background()
	tg, _, _ := fakeRoot(t, map[string]string{"net.ipv4.ip_forward": "0"})
	tests := []struct {
		obj  *Sysctl
		want error
	}{
		{&Sysctl{Name: "net.ipv4.no_such_key", Value: "1"}, errUnknownKey},
		{&Sysctl{Name: "net.ipv4", Value: "1"}, errUnknownKey}, // a directory
		{&Sysctl{Name: "net/../../etc/passwd", Value: "1"}, ErrInvalid},
		{&Sysctl{Name: "net.ipv4.ip_forward", Value: "1\n2"}, ErrInvalid},
	}
	for _, tt := range tests {
		err := tg.Update(ctx, nil, tt.obj)
		if !errors.Is(err, tt.want) || !reconciler.IsTerminal(err) {
			t.Errorf("Update(%v) = %v, want a terminal error wrapping %v", tt.obj, err, tt.want)
		}
	}
	if len(tg.Originals()) != 0 {
		t.Errorf("failed updates recorded originals: %v", tg.Originals())
	}
}

func TestPruneRestoresOnlyWhatItChanged(t *testing.T) {
	ctx := context.Background()
	tg, root, writes := fakeRoot(t, map[string]string{"a.x": "0", "a.y": "0", "a.z": "7"})
	for _, s := range []*Sysctl{{Name: "a.x", Value: "1"}, {Name: "a.y", Value: "1"}} {
		if err := tg.Update(ctx, nil, s); err != nil {
			t.Fatal(err)
		}
	}
	// Someone else sets a.z; the target never changed it.
	os.WriteFile(filepath.Join(root, "a/z"), []byte("9\n"), 0o644)
	desired := func(yield func(*Sysctl, statedb.Revision) bool) { yield(&Sysctl{Name: "a.x", Value: "1"}, 1) }
	if err := tg.Prune(ctx, nil, desired); err != nil {
		t.Fatal(err)
	}
	if x, y, z := readFake(t, root, "a.x"), readFake(t, root, "a.y"), readFake(t, root, "a.z"); x != "1\n" || y != "0\n" || z != "9\n" {
		t.Fatalf("after Prune a.x=%q a.y=%q a.z=%q, want 1, 0 (restored), 9 (untouched)", x, y, z)
	}
	if *writes != 3 {
		t.Fatalf("writes = %d, want 3", *writes)
	}
	// A second Prune does nothing.
	if err := tg.Prune(ctx, nil, desired); err != nil || *writes != 3 {
		t.Fatalf("second Prune: err=%v writes=%d", err, *writes)
	}
}

func TestCancelledContext(t *testing.T) {
	tg, _, writes := fakeRoot(t, map[string]string{"a.x": "0"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := tg.Update(ctx, nil, &Sysctl{Name: "a.x", Value: "1"}); !errors.Is(err, context.Canceled) || *writes != 0 {
		t.Fatalf("Update with a cancelled context = %v (writes %d)", err, *writes)
	}
}

// TestNetworkOnly: with NetworkOnly, a sysctl outside net.* is a terminal
// error and the key is never written; net.* keys are applied as usual.
func TestNetworkOnly(t *testing.T) {
	tg, root, writes := fakeRoot(t, map[string]string{"kernel.pid_max": "4096", "net.ipv4.ip_forward": "0"})
	tg.networkOnly = true
	err := tg.Update(context.Background(), nil, &Sysctl{Name: "kernel.pid_max", Value: "8192"})
	if !errors.Is(err, ErrNotNetwork) || !reconciler.IsTerminal(err) {
		t.Fatalf("kernel.* with NetworkOnly: %v, want terminal ErrNotNetwork", err)
	}
	if got := readFake(t, root, "kernel.pid_max"); got != "4096\n" || *writes != 0 {
		t.Fatalf("kernel.pid_max = %q after %d writes", got, *writes)
	}
	if err := tg.Update(context.Background(), nil, &Sysctl{Name: "net.ipv4.ip_forward", Value: "1"}); err != nil {
		t.Fatal(err)
	}
	if got := readFake(t, root, "net.ipv4.ip_forward"); got != "1" && got != "1\n" {
		t.Fatalf("net.ipv4.ip_forward = %q", got)
	}
	if mustTarget(t, TargetConfig{NetworkOnly: true}).networkOnly != true {
		t.Fatal("TargetConfig.NetworkOnly not applied")
	}
}

// memStore is an OriginalStore in memory that counts its calls.
type memStore struct {
	m              map[string]string
	saves, forgets int
	failLoad       error
}

func (s *memStore) LoadOriginals() (map[string]string, error) {
	if s.failLoad != nil {
		return nil, s.failLoad
	}
	c := map[string]string{}
	for k, v := range s.m {
		c[k] = v
	}
	return c, nil
}
func (s *memStore) SaveOriginal(name, value string) error { s.saves++; s.m[name] = value; return nil }
func (s *memStore) ForgetOriginal(name string) error      { s.forgets++; delete(s.m, name); return nil }

// With an OriginalStore, the original is saved before the first write, a
// new target (a restarted program) restores what an earlier one changed,
// and the record goes once restored.
func TestOriginalStore(t *testing.T) {
	first, root, _ := fakeRoot(t, map[string]string{"net.ipv4.ip_forward": "0", "net.ipv4.conf.all.rp_filter": "2"})
	store := &memStore{m: map[string]string{}}
	first.store = store
	first.writeFile = func(path, value string) error {
		if _, ok := store.m["net.ipv4.ip_forward"]; !ok {
			t.Errorf("write of %s before its original was saved", path)
		}
		return writeKey(path, value)
	}
	ctx := context.Background()
	if err := first.Update(ctx, nil, &Sysctl{Name: "net.ipv4.ip_forward", Value: "1"}); err != nil {
		t.Fatal(err)
	}
	if err := first.Update(ctx, nil, &Sysctl{Name: "net.ipv4.ip_forward", Value: "1"}); err != nil {
		t.Fatal(err)
	}
	if store.saves != 1 || store.m["net.ipv4.ip_forward"] != "0" {
		t.Fatalf("store after two updates: %d saves, %v; want 1 save of the original 0", store.saves, store.m)
	}

	// "Restart": a new target on the same store; its own Update must not
	// take the first run's value for the original.
	second := mustTarget(t, TargetConfig{ProcSysRoot: root, Originals: store})
	if got := second.Originals(); got["net.ipv4.ip_forward"] != "0" || len(got) != 1 {
		t.Fatalf("loaded originals %v", got)
	}
	if err := second.Update(ctx, nil, &Sysctl{Name: "net.ipv4.ip_forward", Value: "1"}); err != nil || store.saves != 1 {
		t.Fatalf("update after restart: %v, %d saves", err, store.saves)
	}
	if err := second.Prune(ctx, nil, func(func(*Sysctl, statedb.Revision) bool) {}); err != nil {
		t.Fatal(err)
	}
	if got := readFake(t, root, "net.ipv4.ip_forward"); got != "0\n" {
		t.Fatalf("ip_forward after prune = %q, want the original 0", got)
	}
	if store.forgets != 1 || len(store.m) != 0 {
		t.Fatalf("store after restore: %d forgets, %v", store.forgets, store.m)
	}

	// The store is read at the first operation, not by NewTarget: a
	// failing load fails operations until it works.
	store.failLoad = errors.New("disk on fire")
	third := mustTarget(t, TargetConfig{ProcSysRoot: root, Originals: store})
	if err := third.Update(ctx, nil, &Sysctl{Name: "net.ipv4.ip_forward", Value: "1"}); !errors.Is(err, store.failLoad) {
		t.Fatalf("Update with a failing store: %v", err)
	}
	if got := readFake(t, root, "net.ipv4.ip_forward"); got != "0\n" {
		t.Fatalf("ip_forward written without its original recorded: %q", got)
	}
	store.failLoad = nil
	if err := third.Update(ctx, nil, &Sysctl{Name: "net.ipv4.ip_forward", Value: "1"}); err != nil || store.m["net.ipv4.ip_forward"] != "0" {
		t.Fatalf("Update once the store works: %v, %v", err, store.m)
	}
}
