package sysctl

import (
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
	"github.com/steadystate/steadystate/statedb"
)

// With the default CheckInterval, a key changed behind the target's back
// is repaired at the next check and not before; a key that still has its
// value is read and not written; a key that failed is not checked (the
// reconciler retries it on its own). On synctest's fake clock, so that
// "not before" is exact.
func TestCheckRepairsWithinInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tg, root, writes := fakeRoot(t, map[string]string{"net.ipv4.ip_forward": "0", "net.ipv4.tcp_syncookies": "1"})
		if tg.checkEvery != DefaultCheckInterval {
			t.Fatalf("CheckInterval %v by default, want DefaultCheckInterval %v", tg.checkEvery, DefaultCheckInterval)
		}
		db := statedb.New()
		table, err := NewTable(db)
		if err != nil {
			t.Fatal(err)
		}
		repairs := &reconciler.RepairLog{}
		cfg := ReconcilerConfig(table, tg)
		cfg.OnRepair = repairs.Add
		cfg.RetryBackoffMin, cfg.RetryBackoffMax = time.Hour, time.Hour
		reconcilertest.Start(t, db, cfg)
		wtxn := db.WriteTxn(table)
		for _, s := range []*Sysctl{{Name: "net.ipv4.ip_forward", Value: "1"}, {Name: "net.ipv4.tcp_syncookies", Value: "1"}, {Name: "net.ipv4.nosuch", Value: "1"}} {
			table.Insert(wtxn, s.SetStatus(reconciler.StatusPending()))
		}
		wtxn.Commit()
		synctest.Wait()
		if *writes != 1 {
			t.Fatalf("%d writes to apply, want 1 (syncookies is already 1)", *writes)
		}

		// Half an interval in, someone writes ip_forward.
		time.Sleep(DefaultCheckInterval / 2)
		synctest.Wait()
		if err := os.WriteFile(root+"/net/ipv4/ip_forward", []byte("0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		checks := tg.Checks()
		time.Sleep(DefaultCheckInterval/2 - time.Millisecond)
		synctest.Wait()
		if got := readFake(t, root, "net.ipv4.ip_forward"); got != "0\n" || tg.Checks() != checks {
			t.Fatalf("repaired (%q) or checked (%d checks) before the interval was over", got, tg.Checks()-checks)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if got := readFake(t, root, "net.ipv4.ip_forward"); got != "1\n" {
			t.Fatalf("ip_forward = %q at the check, want 1 repaired", got)
		}
		if latest, n := repairs.Latest(); n != 1 || latest[0].Object != "net.ipv4.ip_forward=1" || latest[0].FoundBy != reconciler.FoundByEvent {
			t.Fatalf("repairs %d %+v, want ip_forward's, found by the check", n, latest)
		}
		if *writes != 2 {
			t.Fatalf("%d writes, want 2: the repair only", *writes)
		}
		// Nothing else changes: the checks read, and write nothing.
		time.Sleep(10 * DefaultCheckInterval)
		synctest.Wait()
		if *writes != 2 || tg.Checks() != checks+11 {
			t.Fatalf("%d writes, %d checks in 11 intervals; want 2 writes and 11 checks", *writes, tg.Checks()-checks)
		}
		if keys := tg.applied.snapshot(); len(keys) != 2 {
			t.Fatalf("checked keys %v, want ip_forward and syncookies (not the failing one)", keys)
		}
	})
}

// A negative CheckInterval checks nothing: only the reconciler's refresh
// repairs.
func TestCheckDisabled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tg, root, _ := fakeRoot(t, map[string]string{"net.ipv4.ip_forward": "0"})
		tg.checkEvery = -1
		db := statedb.New()
		table, _ := NewTable(db)
		reconcilertest.Start(t, db, ReconcilerConfig(table, tg))
		wtxn := db.WriteTxn(table)
		table.Insert(wtxn, (&Sysctl{Name: "net.ipv4.ip_forward", Value: "1"}).SetStatus(reconciler.StatusPending()))
		wtxn.Commit()
		synctest.Wait()
		os.WriteFile(root+"/net/ipv4/ip_forward", []byte("0\n"), 0o644)
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := readFake(t, root, "net.ipv4.ip_forward"); got != "0\n" || tg.Checks() != 0 {
			t.Fatalf("ip_forward %q, %d checks with the check off", got, tg.Checks())
		}
	})
}
