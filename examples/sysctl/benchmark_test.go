package sysctl

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
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

// driftKeys are the sysctls of BenchmarkRepairDrift: 20 booleans of the
// network namespace, none of which changes another.
var driftKeys = func() []string {
	keys := []string{"net.ipv4.icmp_echo_ignore_all", "net.ipv4.icmp_echo_ignore_broadcasts"}
	for _, dev := range []string{"lo", "default"} {
		for _, k := range []string{"rp_filter", "accept_redirects", "log_martians", "send_redirects", "arp_filter",
			"proxy_arp", "disable_xfrm", "disable_policy", "bootp_relay"} {
			keys = append(keys, "net.ipv4.conf."+dev+"."+k)
		}
	}
	return keys
}()

// trialEvery is how often a trial of BenchmarkRepairDrift starts: fast
// enough to be done in about 30s, slow enough that a key is always free
// (a key is drifted for at most the 5s of the interval).
const trialEvery = 300 * time.Millisecond

// repairTrials is the number of trials of BenchmarkRepairDrift.
const repairTrials = 100

// BenchmarkRepairDrift measures how long a sysctl changed by hand keeps the
// wrong value with the default CheckInterval (5s): the desired keys are
// applied in a namespace, then 100 times one of them is written with
// another value, a trial starting every 300ms or so (at times that do not
// depend on the target's checks, which are 5s apart), and the time until the file holds
// the desired value again (polled every millisecond) is one sample. It
// reports p50-ms, p99-ms and max-ms; the goal is a repair within the
// interval.
func BenchmarkRepairDrift(b *testing.B) {
	netnstest.RequireRoot(b)
	ns, del, err := netnsutil.NewNamed(fmt.Sprintf("ss-bench-%d", os.Getpid()))
	if err != nil {
		b.Fatal(err)
	}
	defer del()
	db := statedb.New()
	table, err := NewTable(db)
	if err != nil {
		b.Fatal(err)
	}
	target, err := NewTarget(TargetConfig{NetNS: string(ns), NetworkOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	cfg := ReconcilerConfig(table, target)
	cfg.Logger = slog.New(slog.DiscardHandler)
	r := reconcilertest.Start(b, db, cfg)
	defer r.Stop()
	wtxn := db.WriteTxn(table)
	for _, k := range driftKeys {
		table.Insert(wtxn, (&Sysctl{Name: k, Value: "1"}).SetStatus(reconciler.StatusPending()))
	}
	rev := table.Revision(wtxn.Commit())
	if _, err := r.WaitUntilReconciled(context.Background(), rev); err != nil {
		b.Fatal(err)
	}
	read := func(k string) string {
		rel, _ := keyPath(k)
		var v []byte
		if err := ns.Do(func() (err error) { v, err = os.ReadFile("/proc/sys/" + rel); return err }); err != nil {
			b.Fatal(err)
		}
		return normalize(string(v))
	}
	write := func(k, v string) {
		rel, _ := keyPath(k)
		if err := ns.Do(func() error { return os.WriteFile("/proc/sys/"+rel, []byte(v), 0) }); err != nil {
			b.Fatal(err)
		}
	}

	var samples []time.Duration
	for b.Loop() {
		samples = samples[:0]
		drifted := map[string]time.Time{}
		start, started := time.Now(), 0
		for len(samples) < repairTrials {
			if started < repairTrials && time.Since(start) >= time.Duration(started)*trialEvery {
				free := slices.DeleteFunc(slices.Clone(driftKeys), func(k string) bool { _, busy := drifted[k]; return busy })
				if len(free) == 0 {
					b.Fatalf("all %d keys drifted at once", len(driftKeys))
				}
				k := free[rand.IntN(len(free))]
				write(k, "0")
				drifted[k] = time.Now()
				started++
			}
			for k, since := range drifted {
				if read(k) == "1" {
					samples = append(samples, time.Since(since))
					delete(drifted, k)
				} else if time.Since(since) > 30*time.Second {
					b.Fatalf("%s not repaired within 30s", k)
				}
			}
			time.Sleep(time.Millisecond)
		}
	}
	slices.Sort(samples)
	pick := func(q float64) float64 {
		return float64(samples[min(len(samples)-1, int(q*float64(len(samples))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pick(0.50), "p50-ms")
	b.ReportMetric(pick(0.99), "p99-ms")
	b.ReportMetric(float64(samples[len(samples)-1])/float64(time.Millisecond), "max-ms")
}
