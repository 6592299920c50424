package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/job"
)

// The agent's memory budget (--memory-budget) is how much memory the Go
// runtime may use before the garbage collector must run: a soft limit
// (runtime/debug.SetMemoryLimit), as GOMEMLIMIT sets one.
//
// A start loads the whole desired state into a heap that was empty: its
// heap only grows, and with the default GOGC=100 the collector ran eight
// times in the first 0.3 s of a start of 50,000 routes and 10,000 rules,
// each marking everything loaded so far and slowing the goroutines that
// allocate (mark assists) on the start's critical path. So until the
// first rounds are done (the agent is Ready) the collector runs only when
// the budget is reached (GOGC off); after that, at GOGC=100 as usual,
// within the budget (a second after Ready, or a minute after the start if
// it is not ready by then).
// Before Ready a start keeps its garbage up to the budget; after, memory
// follows live data: after every collection the limit becomes
// max(budget, 1.25 x the live heap), so a desired state too large for the
// budget makes the collector run about as often as GOGC=25 would (less
// headroom if the runtime holds much besides the live heap: stacks,
// fragmentation), not without end.
//
// GOGC or GOMEMLIMIT in the environment is the operator's own choice: the
// budget is then off, as it is with --memory-budget 0.

// DefaultMemoryBudget is the default of --memory-budget: room for a start
// of 50,000 routes and 10,000 rules (a live heap of about 100 MB) with the
// collector run once or twice, and a peak RSS within 200 MB.
const DefaultMemoryBudget = "170MiB"

// minSensibleBudget is the budget below which startMemoryBudget warns.
const minSensibleBudget = 16 << 20

// liveNum/liveDen is the least ratio of the limit to the live heap: 1.25,
// so the live heap is at most four fifths of the limit. (At 1.5, a start
// of 50,000 routes, whose live heap is 124-128 MiB at a collection
// mid-start, raised a 170 MiB budget to 186-192 MiB, and a restart's
// peak RSS went from 195 to 229 MB.)
const liveNum, liveDen = 5, 4

// memBudget applies a memory budget; see above.
type memBudget struct {
	budget int64
	log    *slog.Logger

	mu      sync.Mutex
	limit   int64 // the soft limit set
	started bool  // the first rounds are done: GOGC=100
	stopped bool  // no more adjustments (tests)
	sample  []metrics.Sample
}

// parseBytes reads a size as GOMEMLIMIT writes one: a number of bytes with
// an optional unit B, KiB, MiB, GiB or TiB; "0" or "off" is none (0).
func parseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "off" || t == "0" {
		return 0, nil
	}
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSuffix(t, u.suffix), u.mult
			break
		}
	}
	t = strings.TrimSpace(t)
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || t[0] < '0' || t[0] > '9' || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is not a size (bytes, or a number with B, KiB, MiB, GiB or TiB; 0 or off for none)", s)
	}
	return n * mult, nil
}

// startMemoryBudget applies --memory-budget from the hive's start: the
// collector off (up to the budget) until a second after the first rounds
// are done, then GOGC=100 within it. It is a no-op if the budget is off or the environment sets
// GOGC or GOMEMLIMIT.
func startMemoryBudget(jobs job.Group, cfg AgentConfig, rounds *firstRounds, log *slog.Logger) error {
	budget, err := parseBytes(cfg.MemoryBudget)
	if err != nil {
		return fmt.Errorf("--memory-budget: %w", err)
	}
	if budget == 0 {
		return nil
	}
	if budget < minSensibleBudget {
		// As GOMEMLIMIT=170 is 170 bytes: the collector would run
		// without end. Said, not refused.
		log.Warn("--memory-budget is very small: the collector will run almost all the time (a unit missing? e.g. 170MiB)", "memory-budget", cfg.MemoryBudget, "bytes", budget)
	}
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		if os.Getenv(env) != "" {
			log.Info("The memory budget is off: the environment sets "+env, "memory-budget", cfg.MemoryBudget)
			return nil
		}
	}
	return jobs.Add(job.OneShot("memory-budget", func(ctx context.Context, _ cell.Health) error {
		// At Start, not when the hive is built: a process that builds
		// the hive and never starts it (the parent of an unprivileged
		// sandbox agent) keeps the runtime's defaults.
		m := newMemBudget(budget, log)
		defer m.stop()
		timer := time.NewTimer(startGCOffMax)
		defer timer.Stop()
		select {
		case <-rounds.Done():
			// A moment later, not at once: GOGC=100 against the live heap
			// last marked (at a small start, the few MB of the hive's
			// build) starts a collection at once, beside READY=1 and the
			// first prunes.
			after := time.NewTimer(readyGCDelay)
			defer after.Stop()
			select {
			case <-after.C:
			case <-ctx.Done():
				return nil
			}
		case <-timer.C:
			log.Info("Not ready after "+startGCOffMax.String()+": the collector at GOGC=100 within the memory budget from now on", "memory-budget", cfg.MemoryBudget)
		case <-ctx.Done():
			return nil
		}
		m.ready()
		<-ctx.Done()
		return nil
	}))
}

// readyGCDelay is how long after Ready the collector goes back to
// GOGC=100.
const readyGCDelay = time.Second

// startGCOffMax is the longest the collector stays off: an agent that
// never gets ready (etcd unreachable, no good desired state) must not
// hold its garbage up to the budget for good.
const startGCOffMax = time.Minute

// buildGCOff turns the collector off while `agent run` builds its hive,
// up to memoryBudget (--memory-budget, read before the hive reads it),
// unless that is 0 or not a size, or the environment sets GOGC or
// GOMEMLIMIT: the hive's build allocates its first 4 MB there, and the
// collection it started at once (about a millisecond of both cores, and
// a stop of the world) was on every start's critical path, before the
// budget took over at Start. The returned function puts the runtime's
// defaults back; call it when the hive will not start with a budget
// (--memory-budget 0, or the agent runs again in a sandbox). It reports
// whether it turned the collector off.
func buildGCOff(memoryBudget string) (undo func(), off bool) {
	budget, err := parseBytes(memoryBudget)
	if err != nil || budget == 0 || os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}, false
	}
	debug.SetMemoryLimit(budget)
	debug.SetGCPercent(-1)
	return func() {
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(math.MaxInt64)
	}, true
}

// newMemBudget turns the collector off up to budget and watches every
// collection from now on.
func newMemBudget(budget int64, log *slog.Logger) *memBudget {
	m := &memBudget{budget: budget, log: log, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	m.mu.Lock()
	m.limit = budget
	debug.SetMemoryLimit(budget)
	debug.SetGCPercent(-1)
	m.mu.Unlock()
	m.watchNextGC()
	return m
}

// ready is the end of the start: the collector at GOGC=100, within the
// limit.
func (m *memBudget) ready() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started || m.stopped {
		return
	}
	m.started = true
	debug.SetGCPercent(100)
}

// gcSentinel is an object whose cleanup runs after the collection that
// found it unreachable: made anew each time, it reports each collection.
type gcSentinel struct{ _ [2]*int }

// watchNextGC calls afterGC after the next collection, and so on.
func (m *memBudget) watchNextGC() {
	runtime.AddCleanup(&gcSentinel{}, func(m *memBudget) {
		if m.afterGC() {
			m.watchNextGC()
		}
	}, m)
}

// afterGC sets the limit to max(budget, 1.25 x live heap) and tells
// whether to watch on.
func (m *memBudget) afterGC() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return false
	}
	metrics.Read(m.sample)
	live := int64(m.sample[0].Value.Uint64())
	limit := max(m.budget, live/liveDen*liveNum)
	if limit != m.limit {
		if limit > m.budget && m.limit == m.budget {
			m.log.Info("The live heap outgrew the memory budget: the limit follows it", "live-MiB", live>>20, "budget-MiB", m.budget>>20, "limit-MiB", limit>>20)
		}
		m.limit = limit
		debug.SetMemoryLimit(limit)
	}
	return true
}

// stop ends the adjustments and gives the runtime back its defaults
// (GOGC=100, no limit), when the agent stops.
func (m *memBudget) stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopped = true
	debug.SetGCPercent(100)
	debug.SetMemoryLimit(math.MaxInt64)
}
