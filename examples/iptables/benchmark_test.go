package iptables

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/steadystate/steadystate/examples/netnstest"
	"github.com/steadystate/steadystate/examples/netnsutil"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
	"github.com/steadystate/steadystate/statedb"
)

const benchRules = 5000

func benchRuleSet(n int) []*Rule {
	rules := make([]*Rule, n)
	for i := range rules {
		rules[i] = &Rule{
			Table: "filter", Chain: "INPUT", Name: fmt.Sprintf("rule-%05d", i), Priority: i,
			Spec: fmt.Sprintf("-s 10.%d.%d.0/24 -p tcp --dport %d -j ACCEPT", i/256, i%256, 1000+i),
		}
	}
	return rules
}

// benchNS creates a fresh namespace outside the timed part.
func benchNS(b *testing.B, i int) (netnsutil.NS, func()) {
	b.StopTimer()
	defer b.StartTimer()
	ns, del, err := netnsutil.NewNamed(fmt.Sprintf("ss-bench-%d-%d", os.Getpid(), i))
	if err != nil {
		b.Fatal(err)
	}
	// Deleted by the returned function, or at the end of the benchmark if
	// the iteration fails before that: no namespace outlives the run.
	done := false
	b.Cleanup(func() {
		if !done {
			done = true
			del()
		}
	})
	return ns, func() {
		b.StopTimer()
		defer b.StartTimer()
		if done {
			return
		}
		done = true
		if err := del(); err != nil {
			b.Error(err)
		}
	}
}

// BenchmarkApply5k applies 5000 rules into a fresh namespace, with the
// reconciler and the target (from the insert of the desired objects until
// all are Done), and as the baseline with one iptables-restore --noflush
// of the user's rules as written: a chain, a plain jump into it, and the
// 5000 rules. impl=reconciler reports its time as a multiple of the
// baseline's (x-baseline, and x-paired-baseline against baseline runs
// interleaved with its own: the median of the per-iteration ratios); the
// goal is at most 1.5.
func BenchmarkApply5k(b *testing.B) {
	netnstest.RequireRoot(b)
	netnstest.RequireCommand(b, "iptables-restore")
	rules := benchRuleSet(benchRules)
	plain := baselineInput(b, rules)

	var baseline time.Duration
	restoreOnce := func(b *testing.B, input []byte) time.Duration {
		var elapsed time.Duration
		i := 0
		for b.Loop() {
			ns, del := benchNS(b, i)
			i++
			start := time.Now()
			if _, err := ns.CommandStdin(input, "iptables-restore", "--noflush", "--wait"); err != nil {
				b.Fatal(err)
			}
			elapsed += time.Since(start)
			del()
		}
		per := elapsed / time.Duration(b.N)
		b.ReportMetric(per.Seconds(), "s/5k-rules")
		b.ReportMetric(benchRules/per.Seconds(), "rules/sec")
		return per
	}
	b.Run("impl=iptables-restore", func(b *testing.B) { baseline = restoreOnce(b, plain) })
	b.Run("impl=reconciler", func(b *testing.B) {
		var elapsed time.Duration
		var ratios []float64
		i := 0
		for b.Loop() {
			ns, del := benchNS(b, i)
			i++
			took := reconcileOnce(b, ns, rules)
			elapsed += took
			del()
			ratios = append(ratios, took.Seconds()/pairedBaseline(b, i, plain).Seconds())
		}
		per := elapsed / time.Duration(b.N)
		b.ReportMetric(per.Seconds(), "s/5k-rules")
		b.ReportMetric(benchRules/per.Seconds(), "rules/sec")
		if baseline > 0 {
			b.ReportMetric(per.Seconds()/baseline.Seconds(), "x-baseline")
		}
		slices.Sort(ratios)
		b.ReportMetric(ratios[len(ratios)/2], "x-paired-baseline")
	})
}

// pairedBaseline runs the baseline once, untimed by b, right after an
// iteration of the reconciler: on a shared machine whose load changes,
// x-paired-baseline compares runs made under the same load.
func pairedBaseline(b *testing.B, i int, input []byte) time.Duration {
	b.StopTimer()
	defer b.StartTimer()
	ns, del, err := netnsutil.NewNamed(fmt.Sprintf("ss-bench-%d-p%d", os.Getpid(), i))
	if err != nil {
		b.Fatal(err)
	}
	defer del()
	start := time.Now()
	if _, err := ns.CommandStdin(input, "iptables-restore", "--noflush", "--wait"); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// baselineInput renders the rules as a user would write them for
// iptables-restore: a chain, a plain jump into it, and each rule.
func baselineInput(b *testing.B, rules []*Rule) []byte {
	var desired []desiredRule
	for _, r := range rules {
		d, err := newDesiredRule(r)
		if err != nil {
			b.Fatal(err)
		}
		desired = append(desired, d)
	}
	sortDesired(desired)
	owned := DefaultChainPrefix + "-INPUT"
	var in restoreInput
	in.add("", "*filter")
	in.add("", ":", owned, " - [0:0]")
	in.add("", "-I INPUT 1 -j ", owned)
	for _, d := range desired {
		in.add("", "-A ", owned, " ", d.args)
	}
	in.add("", "COMMIT")
	return in.buf
}

// reconcileOnce times inserting the rules into a new table and waiting
// until the reconciler has applied them all; setup and teardown are not
// timed.
func reconcileOnce(b *testing.B, ns netnsutil.NS, rules []*Rule) time.Duration {
	b.StopTimer()
	db := statedb.New()
	table, err := NewTable(db)
	if err != nil {
		b.Fatal(err)
	}
	target, err := NewTarget(TargetConfig{NetNS: string(ns), Rules: table})
	if err != nil {
		b.Fatal(err)
	}
	r := reconcilertest.Start(b, db, ReconcilerConfig(table, target))
	objs := make([]*Rule, len(rules))
	for i, rule := range rules {
		objs[i] = rule.Clone().SetStatus(reconciler.StatusPending())
	}
	b.StartTimer()

	start := time.Now()
	wtxn := db.WriteTxn(table)
	for _, o := range objs {
		table.Insert(wtxn, o)
	}
	rev := table.Revision(wtxn.Commit())
	if _, err := r.WaitUntilReconciled(context.Background(), rev); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)

	b.StopTimer()
	r.Stop()
	if n := countOwned(b, ns); n != len(rules) {
		b.Fatalf("%d rules in the namespace, want %d", n, len(rules))
	}
	b.StartTimer()
	return elapsed
}

func countOwned(b *testing.B, ns netnsutil.NS) int {
	out, err := ns.Command("iptables-save", "-t", "filter")
	if err != nil {
		b.Fatal(err)
	}
	state, err := parseSave(out, DefaultChainPrefix)
	if err != nil {
		b.Fatal(err)
	}
	return len(state["filter"].owned[DefaultChainPrefix+"-INPUT"])
}
