package iptables

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"

	"github.com/steadystate/steadystate/examples/netnstest"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
	"github.com/steadystate/steadystate/statedb"
)

// driftRules is the number of rules of BenchmarkRepairDrift.
const driftRules = 2000

// repairTrials is the number of trials of BenchmarkRepairDrift.
const repairTrials = 100

// BenchmarkRepairDrift measures how long a rule deleted by hand stays gone
// on the nf_tables backend: 2000 rules are applied by a reconciler with the
// defaults of ReconcilerConfig (no refresh by age: the target's watch
// reports the deletion), then, 100 times, one of them is deleted with
// `iptables -D`, and the time from nf_tables' notification of the deletion
// to its notification of the rule's return (read by a monitor of the
// benchmark's own) is one sample. It reports p50-ms, p99-ms and max-ms
// over the 100 trials of each iteration.
func BenchmarkRepairDrift(b *testing.B) {
	netnstest.RequireRoot(b)
	netnstest.RequireCommand(b, "iptables-restore")
	ns, del := benchNS(b, 0)
	defer del()
	db := statedb.New()
	table, err := NewTable(db)
	if err != nil {
		b.Fatal(err)
	}
	target, err := NewTarget(TargetConfig{NetNS: string(ns), Rules: table})
	if err != nil {
		b.Fatal(err)
	}
	if nft, err := target.nfTables(context.Background()); err != nil || !nft {
		b.Skipf("iptables is not on the nf_tables backend (%v): nothing notifies", err)
	}
	cfg := ReconcilerConfig(table, target)
	cfg.Logger = slog.New(slog.DiscardHandler)
	r := reconcilertest.Start(b, db, cfg)
	defer r.Stop()
	rules := benchRuleSet(driftRules)
	wtxn := db.WriteTxn(table)
	for _, rl := range rules {
		table.Insert(wtxn, rl.Clone().SetStatus(reconciler.StatusPending()))
	}
	rev := table.Revision(wtxn.Commit())
	if _, err := r.WaitUntilReconciled(context.Background(), rev); err != nil {
		b.Fatal(err)
	}

	// The benchmark's own view of nf_tables' notifications.
	f, err := os.Open(string(ns))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	conn, err := nftables.New(nftables.WithNetNSFd(int(f.Fd())))
	if err != nil {
		b.Fatal(err)
	}
	mon := nftables.NewMonitor()
	events, err := conn.AddGenerationalMonitor(mon)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		mon.Close()
		for range events {
		}
	}()
	owned := target.ChainName("INPUT")
	// await returns when a generation changes a rule of the owned chain
	// in the way typ says.
	await := func(typ nftables.MonitorEventType) time.Time {
		timeout := time.After(30 * time.Second)
		for {
			select {
			case gen := <-events:
				for _, ev := range gen.Changes {
					if r, ok := ev.Data.(*nftables.Rule); ok && ev.Type == typ && r.Chain != nil && r.Chain.Name == owned {
						return time.Now()
					}
				}
			case <-timeout:
				b.Fatalf("no notification %d of a rule of %s within 30s", typ, owned)
			}
		}
	}

	var samples []time.Duration
	trial := 0
	for b.Loop() {
		samples = samples[:0]
		for range repairTrials {
			pos := 1 + (trial*97)%driftRules
			trial++
			if _, err := ns.Command("iptables", "-D", owned, fmt.Sprint(pos)); err != nil {
				b.Fatal(err)
			}
			gone := await(nftables.MonitorEventTypeDelRule)
			back := await(nftables.MonitorEventTypeNewRule)
			samples = append(samples, back.Sub(gone))
		}
	}
	slices.Sort(samples)
	pick := func(q float64) float64 {
		return float64(samples[min(len(samples)-1, int(q*float64(len(samples))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pick(0.50), "p50-ms")
	b.ReportMetric(pick(0.99), "p99-ms")
	b.ReportMetric(float64(samples[len(samples)-1])/float64(time.Millisecond), "max-ms")
	out, err := ns.Command("iptables-save", "-t", "filter")
	if err != nil || strings.Count(string(out), "-A "+owned+" ") != driftRules {
		b.Fatalf("%d rules in %s after the trials, want %d (%v)", strings.Count(string(out), "-A "+owned+" "), owned, driftRules, err)
	}
}

// BenchmarkLegacyCheck measures the watch's check on the legacy backend,
// where nothing notifies: with 2000 rules applied with iptables-legacy,
// one read of every table (one iptables-legacy-save) and the fingerprint
// of the owned chains, what the watch does every CheckInterval (10s by
// default). It reports ms/check. (On the nf_tables backend the watch reads
// nothing while nothing changes.)
func BenchmarkLegacyCheck(b *testing.B) {
	netnstest.RequireRoot(b)
	netnstest.RequireCommand(b, "iptables-legacy-restore")
	ns, del := benchNS(b, 0)
	defer del()
	db := statedb.New()
	table, err := NewTable(db)
	if err != nil {
		b.Fatal(err)
	}
	target, err := NewTarget(TargetConfig{NetNS: string(ns), Rules: table, DisableWatch: true,
		RestoreCommand: "iptables-legacy-restore", SaveCommand: "iptables-legacy-save"})
	if err != nil {
		b.Fatal(err)
	}
	wtxn := db.WriteTxn(table)
	for _, rl := range benchRuleSet(driftRules) {
		table.Insert(wtxn, rl.Clone().SetStatus(reconciler.StatusPending()))
	}
	txn := wtxn.Commit()
	var batch []reconciler.BatchEntry[*Rule]
	for rl := range table.All(txn) {
		batch = append(batch, reconciler.BatchEntry[*Rule]{Object: rl})
	}
	target.UpdateBatch(context.Background(), txn, batch)
	for _, e := range batch {
		if e.Result != nil {
			b.Fatal(e.Result)
		}
	}
	for b.Loop() {
		prints, err := target.fingerprints(context.Background())
		if err != nil || len(prints) != 1 {
			b.Fatalf("fingerprints %v, %v; want one chain", prints, err)
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N), "ms/check")
}
