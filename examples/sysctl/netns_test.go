package sysctl

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/steadystate/steadystate/examples/netnstest"
	"github.com/steadystate/steadystate/examples/netnsutil"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
	"github.com/steadystate/steadystate/statedb"
)

// readNS reads a sysctl inside ns, normalized.
func readNS(t *testing.T, ns netnsutil.NS, name string) string {
	t.Helper()
	rel, err := keyPath(name)
	if err != nil {
		t.Fatal(err)
	}
	var b []byte
	if err := ns.Do(func() (err error) { b, err = os.ReadFile("/proc/sys/" + rel); return err }); err != nil {
		t.Fatal(err)
	}
	return normalize(string(b))
}

// startReconciler runs a sysctl reconciler on a new table until the test
// ends. The target checks its keys every 50ms (drift is repaired within
// that); the repairs go to repairs, when given.
func startReconciler(t *testing.T, ns netnsutil.NS, repairs ...*reconciler.RepairLog) (*statedb.DB, statedb.RWTable[*Sysctl], reconciler.Reconciler[*Sysctl], *Target) {
	t.Helper()
	db := statedb.New()
	table, err := NewTable(db)
	if err != nil {
		t.Fatal(err)
	}
	target := mustTarget(t, TargetConfig{NetNS: string(ns), CheckInterval: 50 * time.Millisecond})
	cfg := ReconcilerConfig(table, target)
	cfg.RetryBackoffMin = 10 * time.Millisecond
	for _, l := range repairs {
		cfg.OnRepair = l.Add
	}
	r := reconcilertest.Start(t, db, cfg)
	return db, table, r, target
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestReconcileInNamespace is the story of the sysctl target against the
// real kernel, in a throw-away network namespace: apply, fail clearly on
// bad keys, repair drift on a full reconciliation, restore on delete, and
// never change the host.
func TestReconcileInNamespace(t *testing.T) {
	ns := netnstest.New(t)
	keys := []string{"net.ipv4.ip_forward", "net.ipv4.ip_local_port_range", "net.ipv4.conf.lo.accept_local"}
	host := map[string]string{}
	before := map[string]string{}
	for _, k := range keys {
		host[k] = readNS(t, "", k)
		before[k] = readNS(t, ns, k)
	}
	repairs := &reconciler.RepairLog{}
	db, table, r, _ := startReconciler(t, ns, repairs)
	ctx := context.Background()

	// Insert the desired state, including a read-only and an unknown key.
	wtxn := db.WriteTxn(table)
	for _, s := range []*Sysctl{
		{Name: "net.ipv4.ip_forward", Value: "1"},
		{Name: "net.ipv4.ip_local_port_range", Value: "20000 30000"},
		{Name: "net.ipv4.conf.lo.accept_local", Value: "1"},
		{Name: "kernel.osrelease", Value: "1.0"},
		{Name: "net.ipv4.no_such_key", Value: "1"},
	} {
		table.Insert(wtxn, s.SetStatus(reconciler.StatusPending()))
	}
	rev := table.Revision(wtxn.Commit())
	if _, err := r.WaitUntilReconciled(ctx, rev); !errors.Is(err, reconciler.ErrNotAllReconciled) {
		t.Fatalf("WaitUntilReconciled = %v, want ErrNotAllReconciled (two bad keys)", err)
	}
	txn := db.ReadTxn()
	for s := range table.All(txn) {
		switch s.Name {
		case "kernel.osrelease":
			if s.Status.Kind != reconciler.StatusKindError || !strings.Contains(s.Status.Error, "read-only") {
				t.Errorf("%s: status %v, want a read-only error", s.Name, s.Status)
			}
		case "net.ipv4.no_such_key":
			if s.Status.Kind != reconciler.StatusKindError || !strings.Contains(s.Status.Error, "does not exist") {
				t.Errorf("%s: status %v, want an unknown key error", s.Name, s.Status)
			}
		default:
			if s.Status.Kind != reconciler.StatusKindDone {
				t.Errorf("%s: status %v, want Done", s.Name, s.Status)
			}
		}
	}
	want := map[string]string{"net.ipv4.ip_forward": "1", "net.ipv4.ip_local_port_range": "20000 30000", "net.ipv4.conf.lo.accept_local": "1"}
	for k, v := range want {
		if got := readNS(t, ns, k); got != v {
			t.Errorf("%s in namespace = %q, want %q", k, got, v)
		}
	}

	// Change a value behind the target's back; its check reports it and
	// the reconciler repairs it: one repair, with the change.
	if err := ns.Do(func() error { return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("0"), 0) }); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ip_forward is repaired", func() bool { _, n := repairs.Latest(); return n == 1 })
	if got := readNS(t, ns, "net.ipv4.ip_forward"); got != "1" {
		t.Errorf("ip_forward = %q after the repair, want 1", got)
	}
	if latest, _ := repairs.Latest(); latest[0].FoundBy != reconciler.FoundByEvent || latest[0].Changes.String() != "change sysctl net.ipv4.ip_forward: 0 -> 1\n" {
		t.Errorf("repair %+v", latest[0])
	}

	// Delete desired objects: the values found before are restored.
	wtxn = db.WriteTxn(table)
	table.Delete(wtxn, &Sysctl{Name: "net.ipv4.ip_forward"})
	table.Delete(wtxn, &Sysctl{Name: "net.ipv4.ip_local_port_range"})
	rev = table.Revision(wtxn.Commit())
	r.WaitUntilReconciled(ctx, rev)
	for _, k := range []string{"net.ipv4.ip_forward", "net.ipv4.ip_local_port_range"} {
		if got := readNS(t, ns, k); got != before[k] {
			t.Errorf("%s after delete = %q, want the original %q", k, got, before[k])
		}
	}
	if got := readNS(t, ns, "net.ipv4.conf.lo.accept_local"); got != "1" {
		t.Errorf("accept_local = %q, still desired as 1", got)
	}
	// The host was never touched.
	for _, k := range keys {
		if got := readNS(t, "", k); got != host[k] {
			t.Errorf("host %s changed from %q to %q", k, host[k], got)
		}
	}
}

// TestPruneRestoresInNamespace: a new target (as after a restart of the
// agent) that never changed a key leaves it alone; one that did restores
// it when it is no longer desired.
func TestPruneRestoresInNamespace(t *testing.T) {
	ns := netnstest.New(t)
	ctx := context.Background()
	orig := readNS(t, ns, "net.ipv4.conf.lo.accept_local")
	tg := mustTarget(t, TargetConfig{NetNS: string(ns)})
	if err := tg.Update(ctx, nil, &Sysctl{Name: "net.ipv4.conf.lo.accept_local", Value: "1"}); err != nil {
		t.Fatal(err)
	}
	other := mustTarget(t, TargetConfig{NetNS: string(ns)})
	if err := other.Prune(ctx, nil, func(func(*Sysctl, statedb.Revision) bool) {}); err != nil {
		t.Fatal(err)
	}
	if got := readNS(t, ns, "net.ipv4.conf.lo.accept_local"); got != "1" {
		t.Fatalf("a target that never changed the key restored it: %q", got)
	}
	if err := tg.Prune(ctx, nil, func(func(*Sysctl, statedb.Revision) bool) {}); err != nil {
		t.Fatal(err)
	}
	if got := readNS(t, ns, "net.ipv4.conf.lo.accept_local"); got != orig {
		t.Fatalf("after Prune accept_local = %q, want %q", got, orig)
	}
}
