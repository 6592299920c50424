package etcd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/steadystate/steadystate/etcd"
)

// BenchmarkRollout runs the fleet benchmark's simulated agents (100, 10
// with -short; FLEET_AGENTS overrides) on a 3-member etcd with 10,000
// desired objects (1,000 with -short), and measures in the same run: the
// median time from a plain fleet apply of one changed object until every
// agent reports it applied (p50-apply-ms, over 15 rounds half a second
// apart); then, a second and a half later each, a rollout of
// one changed object in steps 1,10%,100% with no failure, from its start
// until it completed (rollout-s), and that time over the budget the
// rollout issue sets, 3 x p50-apply + 1s (rollout-budget-ratio: at most 1
// meets it); and a rollout whose canary refuses the change: the time from
// the canary's NACK (its status write, as a watch sees it) until its
// status says it applied the previous state again (halt-rollback-ms).
func BenchmarkRollout(b *testing.B) {
	agents, objects := 100, 10_000
	if testing.Short() {
		agents, objects = 10, 1_000
	}
	if v, err := strconv.Atoi(os.Getenv("FLEET_AGENTS")); err == nil {
		agents = v
	}
	b.Run(fmt.Sprintf("agents=%d/objects=%d", agents, objects), func(b *testing.B) {
		for range b.N {
			rolloutOnce(b, agents, objects)
		}
	})
}

func rolloutOnce(b *testing.B, agents, objects int) {
	b.StopTimer()
	f := newBenchFleet(b, objects)
	defer f.stop()
	f.startAgents(agents)
	ctx, c, l, desired, fleet, started := f.ctx, f.c, f.l, f.desired, f.fleet, f.agents

	// Plain applies: one object changed, until every agent applied it,
	// half a second apart as BenchmarkFleet's (the agents' status writes
	// are rate-limited to one per 500ms after a burst of 3).
	var lat []time.Duration
	for r := range 15 {
		time.Sleep(500 * time.Millisecond)
		desired["o"+strconv.Itoa(r*7919%objects)] = []byte("v" + strconv.Itoa(r+1))
		t0 := time.Now()
		rev, err := etcd.Apply(ctx, c, l, "objs", etcd.ScopeAll, desired)
		if err != nil {
			b.Fatal(err)
		}
		fleet.waitApplied(b, rev, agents)
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	p50 := lat[len(lat)/2]

	// A rollout of one changed object, 1,10%,100%, at an operator's pace
	// (the agents' status bursts refilled).
	time.Sleep(1500 * time.Millisecond)
	desired["o1"] = []byte("rolled")
	b.StartTimer()
	t0 := time.Now()
	d, err := etcd.StartRollout(ctx, c, l, etcd.RolloutSpec{Tables: map[string]map[string][]byte{"objs": desired},
		Steps: []etcd.StepSize{{Count: 1}, {Percent: 10}, {Percent: 100}}, StepTimeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	r, err := d.Run(ctx, nil)
	took := time.Since(t0)
	b.StopTimer()
	d.Close(ctx)
	if err != nil || r.Result != etcd.RolloutCompleted {
		b.Fatalf("rollout: %+v, %v", r, err)
	}
	fleet.waitApplied(b, r.Revision, agents)

	// A rollout the canary refuses: from its NACK to its status at the
	// previous state again.
	time.Sleep(1500 * time.Millisecond)
	canary := started[agents/2].name
	statuses := watchStatus(ctx, c, l, canary)
	desired["o2"] = []byte("fail-bench")
	d, err = etcd.StartRollout(ctx, c, l, etcd.RolloutSpec{Tables: map[string]map[string][]byte{"objs": desired},
		Steps: []etcd.StepSize{{Count: 1}, {Percent: 100}}, Canary: []string{canary}, StepTimeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	halted, err := d.Run(ctx, nil)
	d.Close(ctx)
	if err == nil || halted.Result != etcd.RolloutRolledBack || len(d.RolledBack()) != 1 || d.RolledBack()[0].Answer != etcd.AnswerACK {
		b.Fatalf("a rollout the canary refuses: %+v, %v, back %+v", halted, err, d.RolledBack())
	}
	nack, back := statuses.nackAndBack(halted.Revision)
	if nack.IsZero() || back.IsZero() {
		b.Fatalf("the canary's statuses: no NACK then status at the rollback's revision %d", halted.Revision)
	}
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50-apply-ms")
	b.ReportMetric(took.Seconds(), "rollout-s")
	b.ReportMetric(took.Seconds()/(3*p50.Seconds()+1), "rollout-budget-ratio")
	b.ReportMetric(float64(back.Sub(nack).Microseconds())/1000, "halt-rollback-ms")
}

// statusLog is every status write of one node, as a watch saw it.
type statusLog struct {
	mu  sync.Mutex
	log []timedStatus
}

type timedStatus struct {
	at time.Time
	st etcd.NodeStatus
}

func watchStatus(ctx context.Context, c *clientv3.Client, l etcd.Layout, node string) *statusLog {
	s := &statusLog{}
	ch := c.Watch(ctx, l.Status(node))
	go func() {
		for resp := range ch {
			for _, ev := range resp.Events {
				var st etcd.NodeStatus
				if json.Unmarshal(ev.Kv.Value, &st) == nil {
					s.mu.Lock()
					s.log = append(s.log, timedStatus{time.Now(), st})
					s.mu.Unlock()
				}
			}
		}
	}()
	return s
}

// nackAndBack returns when the node first reported errors, and when it
// then first reported the state of revision rollback applied.
func (s *statusLog) nackAndBack(rollback int64) (nack, back time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.log {
		switch {
		case nack.IsZero() && e.st.Objects["Error"] > 0:
			nack = e.at
		case !nack.IsZero() && e.st.Applied(rollback):
			return nack, e.at
		}
	}
	return nack, time.Time{}
}
