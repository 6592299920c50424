package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/steadystate/steadystate/examples/iptables"
	"github.com/steadystate/steadystate/examples/routes"
	"github.com/steadystate/steadystate/examples/sysctl"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/hivetest"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reflector/filesource"
	"github.com/steadystate/steadystate/statedb"
	"github.com/steadystate/steadystate/statedb/statedbcell"
)

// loaderFixture is file mode in a test hive, on its own tables, with
// reconcilers that do nothing: what reaches the tables is what would reach
// the targets.
type loaderFixture struct {
	src     *filesource.Source[fileObject]
	first   *firstLoad
	metrics prometheus.Gatherer
	db      *statedb.DB
	sysctls statedb.RWTable[*sysctl.Sysctl]
	routes  statedb.RWTable[*routes.Route]
	rules   statedb.RWTable[*iptables.Rule]
	kinds   kindsIn
}

func startLoaderFixture(t *testing.T, cfg AgentConfig) *loaderFixture {
	t.Helper()
	f := &loaderFixture{}
	h := hivetest.Start(t,
		statedbcell.Cell,
		cell.Module("agent", "test",
			cell.Provide(
				func() AgentConfig { return cfg },
				func(db *statedb.DB) (statedb.RWTable[*sysctl.Sysctl], error) { return sysctl.NewTable(db) },
				func(db *statedb.DB) (statedb.RWTable[*routes.Route], error) { return routes.NewTable(db) },
				func(db *statedb.DB) (statedb.RWTable[*iptables.Rule], error) { return iptables.NewTable(db) },
				func() reconciler.Reconciler[*sysctl.Sysctl] { return nopReconciler[*sysctl.Sysctl]{} },
				func() reconciler.Reconciler[*routes.Route] { return nopReconciler[*routes.Route]{} },
				func() reconciler.Reconciler[*iptables.Rule] { return nopReconciler[*iptables.Rule]{} },
				newFirstLoad,
				newNotifier,
			),
			kindRuntimes(),
			fileModeCells,
			cell.Invoke(func(src *filesource.Source[fileObject], first *firstLoad, db *statedb.DB, s statedb.RWTable[*sysctl.Sysctl], r statedb.RWTable[*routes.Route], ru statedb.RWTable[*iptables.Rule], k kindsIn) {
				f.src, f.first, f.db, f.sysctls, f.routes, f.rules, f.kinds = src, first, db, s, r, ru, k
			}),
		),
	)
	f.metrics = h.Registry()
	return f
}

// nopReconciler is a reconciler that does nothing, for tests of what
// reaches the tables.
type nopReconciler[Obj any] struct{}

func (nopReconciler[Obj]) Run(ctx context.Context) error { <-ctx.Done(); return nil }
func (nopReconciler[Obj]) Prune()                        {}
func (nopReconciler[Obj]) WaitUntilReconciled(_ context.Context, rev statedb.Revision) (statedb.Revision, error) {
	return rev, nil
}

func (f *loaderFixture) count(result string) int {
	return int(gathered(f.metrics, "steadystate_agent_desired_loads_total", "result", result))
}

// gathered is the value of the metric name with the label label=value.
func gathered(g prometheus.Gatherer, name, label, value string) float64 {
	mfs, _ := g.Gather()
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if label == "" || lp.GetName() == label && lp.GetValue() == value {
					if c := m.GetCounter(); c != nil {
						return c.GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
			if label == "" {
				if c := m.GetCounter(); c != nil {
					return c.GetValue()
				}
			}
		}
	}
	return 0
}

// marker is the value of the sysctl that tells the file's versions apart.
func (f *loaderFixture) marker() string {
	s, _, found := f.sysctls.Get(f.db.ReadTxn(), sysctl.NameIndex.Query("net.ipv4.ip_forward"))
	if !found {
		return ""
	}
	return s.Value
}

// desiredVersion is a whole desired file: 3 sysctls, 40 routes and 4
// rules, the same objects in every version but ip_forward = marker.
func desiredVersion(marker string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "sysctls:\n  - name: net.ipv4.ip_forward\n    value: %q\n", marker)
	b.WriteString("  - name: net.ipv4.conf.all.rp_filter\n    value: \"2\"\n  - name: net.ipv6.conf.all.forwarding\n    value: \"1\"\n")
	b.WriteString("routes:\n")
	for i := range 40 {
		fmt.Fprintf(&b, "  - prefix: 10.%d.0.0/16\n    type: blackhole\n", i)
	}
	b.WriteString("rules:\n")
	for i := range 4 {
		fmt.Fprintf(&b, "  - table: filter\n    chain: INPUT\n    name: r%d\n    priority: %d\n    spec: -p tcp --dport %d -j ACCEPT\n", i, i, 1000+i)
	}
	return b.String()
}

// writeSlowly writes data to path as a careless writer does: truncate,
// then four pieces cut at random, with short pauses and one longer than
// the settle time, holding the file open throughout.
func writeSlowly(t *testing.T, path, data string, rng *rand.Rand, longPause time.Duration) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cuts := []int{0, rng.IntN(len(data)), rng.IntN(len(data)), rng.IntN(len(data)), len(data)}
	slices.Sort(cuts)
	long := rng.IntN(4)
	for i := range 4 {
		pause := time.Duration(rng.Int64N(int64(2 * time.Millisecond)))
		if i == long {
			pause = longPause
		}
		time.Sleep(pause)
		if _, err := f.WriteString(data[cuts[i]:cuts[i+1]]); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// deletions counts the deletes that reach a table from now on (a change
// iterator never loses one).
func deletions[Obj any](t *testing.T, db *statedb.DB, table statedb.Table[Obj]) func() int {
	wtxn := db.WriteTxn(table)
	changes, err := table.Changes(wtxn)
	wtxn.Commit()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(changes.Close)
	n := 0
	return func() int {
		seq, _ := changes.Next(db.ReadTxn())
		for ch := range seq {
			if ch.Deleted {
				n++
			}
		}
		return n
	}
}

// waitUntil polls cond every millisecond, up to 20s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLoaderAppliesOnlyWholeFiles writes the desired file hundreds of times
// the careless way: truncated, then in pieces with pauses longer than the
// settle time, and now and then left empty (truncated and closed). Every version holds the same
// objects, so any half-written file that reached the tables would delete
// some: the count of deletes must be exactly 0, every whole version applied
// exactly once, every empty file rejected exactly once.
func TestLoaderAppliesOnlyWholeFiles(t *testing.T) {
	const (
		rounds    = 200
		settle    = 15 * time.Millisecond
		longPause = 2 * settle
	)
	path := filepath.Join(t.TempDir(), "desired.yaml")
	if err := writeFile(t, path, []byte(desiredVersion("0")), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := defaultConfig()
	cfg.Desired, cfg.SettleTime, cfg.ReloadInterval = path, settle, 50*time.Millisecond
	f := startLoaderFixture(t, cfg)
	waitUntil(t, "the first load", func() bool { return f.marker() == "0" })
	deleted := []func() int{deletions(t, f.db, f.sysctls), deletions(t, f.db, f.routes), deletions(t, f.db, f.rules)}

	rng := rand.New(rand.NewPCG(1, 2))
	empties := 0
	for i := range rounds {
		if i%10 == 9 {
			// Truncated and left empty: rejected, nothing changes.
			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
			empties++
			waitUntil(t, "the empty file rejected", func() bool { return f.count(loadRejected) == empties })
		}
		marker := fmt.Sprint((i + 1) % 2)
		writeSlowly(t, path, desiredVersion(marker), rng, longPause)
		waitUntil(t, "version "+marker, func() bool { return f.marker() == marker })
	}
	// The counter follows the commit: wait for it to catch up, then
	// compare exactly.
	waitUntil(t, "the last load counted", func() bool { return f.count(loadApplied) >= rounds+1 })
	total := 0
	for _, d := range deleted {
		total += d()
	}
	applied, rejected := f.count(loadApplied), f.count(loadRejected)
	deferred := int(gathered(f.metrics, "steadystate_agent_desired_deferred_total", "", ""))
	t.Logf("%d rounds: %d loads applied, %d rejected (empty), %d reads put off, %d deletes reached the tables",
		rounds, applied, rejected, deferred, total)
	if total != 0 {
		t.Errorf("%d deletes reached the tables: a partial file was applied", total)
	}
	if applied != rounds+1 || rejected != empties {
		t.Errorf("applied %d, rejected %d; want %d applied (each whole version once), %d rejected (each empty file once)",
			applied, rejected, rounds+1, empties)
	}
	if deferred == 0 {
		t.Errorf("no read was put off: the test did not catch the loader mid-write")
	}
	if n := f.routes.NumObjects(f.db.ReadTxn()); n != 40 {
		t.Errorf("%d routes, want 40", n)
	}
}

// TestLoaderWatches: a rename is seen by notification (the poll is an
// hour), Reload reads at once, and a directory removed and made again is
// watched again (by the poll).
func TestLoaderWatches(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "conf")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "desired.yaml")
	write := func(marker string) {
		if err := writeFile(t, path, []byte(desiredVersion(marker)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("0")
	cfg := defaultConfig()
	cfg.Desired, cfg.SettleTime, cfg.ReloadInterval = path, 10*time.Millisecond, time.Hour
	f := startLoaderFixture(t, cfg)
	waitUntil(t, "the first load", func() bool { return f.marker() == "0" })

	write("1")
	waitUntil(t, "a rename seen by notification", func() bool { return f.marker() == "1" })

	// Removing the directory: the file is gone (rejected, state kept).
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	f.src.Reload()
	waitUntil(t, "the missing file rejected", func() bool { return f.count(loadRejected) == 1 })
	if f.marker() != "1" {
		t.Fatalf("the desired state changed after the file went: marker %q", f.marker())
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write("0")
	f.src.Reload() // adds the watch back and reads
	waitUntil(t, "the file back", func() bool { return f.marker() == "0" })
	write("1")
	waitUntil(t, "a rename in the new directory seen by notification", func() bool { return f.marker() == "1" })
	waitUntil(t, "the last load counted", func() bool { return f.count(loadApplied) >= 4 })
	if got := f.count(loadApplied); got != 4 {
		t.Errorf("%d loads applied, want 4", got)
	}
}

// The agent's readiness (/readyz): not before the first load, not while
// objects wait for their first attempt, and then for good.
func TestAgentReady(t *testing.T) {
	path := filepath.Join(t.TempDir(), "desired.yaml")
	cfg := defaultConfig()
	cfg.Desired, cfg.SettleTime = path, 0
	f := startLoaderFixture(t, cfg)
	rounds := newFirstRounds()
	ready := agentReady(apiParams{Config: cfg, DB: f.db, Kinds: f.kinds, Loaded: f.first, Rounds: rounds})
	closed := func() bool {
		select {
		case <-rounds.Done():
			return true
		default:
			return false
		}
	}
	if err := ready(); err == nil || !strings.Contains(err.Error(), "not applied yet") {
		t.Fatalf("before the file exists: %v", err)
	}
	if err := writeFile(t, path, []byte(desiredVersion("1")), 0o644); err != nil {
		t.Fatal(err)
	}
	f.src.Reload()
	// The load: the tables hold it, and then the loader said so (it
	// closes firstApplied just after the commit).
	waitUntil(t, "the load", func() bool {
		select {
		case <-f.first.Done():
			return f.marker() == "1"
		default:
			return false
		}
	})
	if err := ready(); err == nil || !strings.Contains(err.Error(), "table sysctls: 3 objects not reconciled yet") {
		t.Fatalf("objects pending: %v", err)
	}
	// The reconcilers' part, by hand: everything Done (one in Error
	// counts as tried).
	wtxn := f.db.WriteTxn(f.sysctls, f.routes, f.rules)
	markAll(t, wtxn, f.sysctls, (*sysctl.Sysctl).SetStatus, reconciler.StatusDone())
	markAll(t, wtxn, f.routes, (*routes.Route).SetStatus, reconciler.StatusError(errors.New("ENODEV")))
	markAll(t, wtxn, f.rules, (*iptables.Rule).SetStatus, reconciler.StatusDone())
	wtxn.Commit()
	if closed() {
		t.Fatal("the first rounds were done before a probe found every object tried")
	}
	if err := ready(); err != nil {
		t.Fatalf("all tried: %v", err)
	}
	// The probe that found it ready closed the first rounds (READY=1 to
	// systemd and the prunes follow them).
	if !closed() {
		t.Fatal("ready, but the first rounds are not done")
	}
	wtxn = f.db.WriteTxn(f.sysctls, f.routes, f.rules)
	markAll(t, wtxn, f.sysctls, (*sysctl.Sysctl).SetStatus, reconciler.StatusPending())
	wtxn.Commit()
	if err := ready(); err != nil {
		t.Fatalf("ready is for good, new work or not: %v", err)
	}
	// And the first rounds done (by the first-rounds job, say) are ready,
	// whatever the tables hold.
	other := newFirstRounds()
	other.close()
	if err := agentReady(apiParams{Config: cfg, DB: f.db, Kinds: f.kinds, Loaded: newFirstLoad(), Rounds: other})(); err != nil {
		t.Fatalf("first rounds done: %v", err)
	}
}

func markAll[Obj interface{ Clone() Obj }](t *testing.T, wtxn statedb.WriteTxn, table statedb.RWTable[Obj], set func(Obj, reconciler.Status) Obj, st reconciler.Status) {
	t.Helper()
	var objs []Obj
	for obj := range table.All(wtxn) {
		objs = append(objs, obj)
	}
	for _, obj := range objs {
		if _, _, err := table.Insert(wtxn, set(obj.Clone(), st)); err != nil {
			t.Fatal(err)
		}
	}
}
