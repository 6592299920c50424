package etcd_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/steadystate/steadystate/etcd"
	"github.com/steadystate/steadystate/etcd/etcdtest"
	"github.com/steadystate/steadystate/statedb"
)

// scaleObjects is how many desired objects each agent of the scale
// benchmark holds (all fleet-wide: every agent holds the same ones).
const scaleObjects = 1_000

// BenchmarkFleetScale runs N simulated agents in one process on a 3-member
// etcd (the v3.7.3 server etcdtest builds), each as a real node runs:
// its own etcd client (the one etcd.ClientOptions makes, as fleet mode's
// cell does: a connection to every member), its own DB and table,
// reflector (etcd source), reconciler (an in-memory target), status
// publisher, and a report loop that, like fleet mode's, waits for the
// reflector's revision or the table to move. Each agent holds scaleObjects
// objects. It reports:
//
//   - initial-sync-s: from the start of the agents (50 at a time) until
//     every one reports the first state applied;
//   - p50-apply-ms, p90-apply-ms, p99-apply-ms, max-apply-ms: one object
//     changed once a second for the window, each from the call of
//     etcd.Apply until every node's status (a watch on the status keys,
//     NodeStatus.Applied: what `fleet status --wait` reads) says it
//     applied that revision; a change that takes longer than a second
//     delays the next (changes/s tells);
//   - status-writes/s/agent: the publishers' writes over that window;
//   - etcd-req/change/agent: the unary gRPC requests the etcd members
//     served over the window (grpc_server_handled_total), per change and
//     agent: status writes, the sources' liveness reads, record rewrites;
//   - watchers/agent, watch-streams/agent: etcd's watchers and watch
//     streams (etcd_debugging_mvcc_watcher_total, _watch_stream_total,
//     summed over the members) added by the agents, per agent;
//   - heap-MB/agent: the process's heap in use after a GC once every agent
//     synced, less the same before they started, per agent (the agents
//     share the process: this is their statedb, reflector, reconciler,
//     in-memory target, publisher and etcd client).
//
// Sizes: 250 agents with a 20s window (make bench; bench-check guards it),
// 100 agents with a 3s window with -short (make bench-short), and
// FLEET_SCALE_AGENTS (e.g. 100,250,500,1000) with FLEET_SCALE_WINDOW (e.g.
// 60s) for the curve (make bench-scale). FLEET_SCALE_CPUPROFILE and
// FLEET_SCALE_HEAPPROFILE name files for a CPU profile of the window and a
// heap profile once the agents synced.
func BenchmarkFleetScale(b *testing.B) {
	sizes, window := []int{250}, 20*time.Second
	if testing.Short() {
		sizes, window = []int{100}, 3*time.Second
	}
	if s := os.Getenv("FLEET_SCALE_AGENTS"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("FLEET_SCALE_AGENTS=%q: %q is not a number of agents", s, f)
			}
			sizes = append(sizes, n)
		}
	}
	if s := os.Getenv("FLEET_SCALE_WINDOW"); s != "" {
		var err error
		if window, err = time.ParseDuration(s); err != nil || window < time.Second {
			b.Fatalf("FLEET_SCALE_WINDOW=%q: want a duration of at least 1s", s)
		}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("agents=%d/objects=%d", n, scaleObjects), func(b *testing.B) {
			for range b.N {
				scaleOnce(b, n, window)
			}
		})
	}
}

func scaleOnce(b *testing.B, n int, window time.Duration) {
	b.StopTimer()
	// Each agent's client connects to the 3 members; each member serves
	// every agent.
	raiseOpenFiles(b, uint64(4*n+1024))
	f := newBenchFleet(b, scaleObjects)
	defer f.stop()
	before := scrapeEtcd(b, f.cl)
	heapBefore := heapInUse()

	b.StartTimer()
	start := time.Now()
	f.startNodes(n)
	initial := time.Since(start)
	heapAfter := heapInUse()
	writeHeapProfile(b)
	synced := scrapeEtcd(b, f.cl)

	// One change a second for the window; the writes are counted until
	// the window's end (or the last change applied, if later).
	changes := max(int(window/time.Second), 1)
	writesBefore := f.publisherWrites()
	cpuBefore, etcdBefore := processCPU(b), membersCPU(b, f.cl)
	defer profileWindow(b)()
	var lat []time.Duration
	t0 := time.Now()
	for r := range changes {
		time.Sleep(time.Until(t0.Add(time.Duration(r) * time.Second)))
		f.desired["o"+strconv.Itoa(r*7919%scaleObjects)] = []byte("v" + strconv.Itoa(r+1))
		at := time.Now()
		rev, err := etcd.Apply(f.ctx, f.c, f.l, "objs", etcd.ScopeAll, f.desired)
		if err != nil {
			b.Fatal(err)
		}
		f.fleet.waitApplied(b, rev, n)
		lat = append(lat, time.Since(at))
	}
	time.Sleep(time.Until(t0.Add(time.Duration(changes) * time.Second)))
	took := time.Since(t0)
	writes := f.publisherWrites() - writesBefore
	cpu, etcdCPU := processCPU(b)-cpuBefore, membersCPU(b, f.cl)-etcdBefore
	after := scrapeEtcd(b, f.cl)
	b.StopTimer()

	slices.Sort(lat)
	b.ReportMetric(initial.Seconds(), "initial-sync-s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-apply-ms")
	b.ReportMetric(float64(lat[(len(lat)*90-1)/100].Microseconds())/1000, "p90-apply-ms")
	b.ReportMetric(float64(lat[(len(lat)*99-1)/100].Microseconds())/1000, "p99-apply-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-apply-ms")
	b.ReportMetric(float64(changes)/took.Seconds(), "changes/s")
	b.ReportMetric(float64(writes)/took.Seconds()/float64(n), "status-writes/s/agent")
	b.ReportMetric((after.unary-synced.unary)/float64(changes)/float64(n), "etcd-req/change/agent")
	b.ReportMetric((synced.watchers-before.watchers)/float64(n), "watchers/agent")
	b.ReportMetric((synced.streams-before.streams)/float64(n), "watch-streams/agent")
	b.ReportMetric(float64(int64(heapAfter)-int64(heapBefore))/float64(n)/(1<<20), "heap-MB/agent")
	perAgentChange := float64(changes) * float64(n)
	b.ReportMetric(float64(etcdCPU.Microseconds())/perAgentChange, "etcd-cpu-us/change/agent")
	b.ReportMetric(float64(cpu.Microseconds())/perAgentChange, "agents-cpu-us/change/agent")
	b.Logf("%d agents x %d objects: %d changes in %v (p50 %v, p99 %v, max %v); %d status writes; etcd: %.0f watchers, %.0f watch streams, %.0f unary requests, %v CPU (3 members) in the window; this process %v CPU",
		n, scaleObjects, changes, took.Round(time.Millisecond), lat[len(lat)/2], lat[(len(lat)*99-1)/100], lat[len(lat)-1], writes,
		after.watchers, after.streams, after.unary-synced.unary, etcdCPU, cpu)
}

// startNodes starts n agents ("node0000".."nodeN"), each with its own
// etcd client, 50 at a time (a fleet's nodes do not all start in the same
// millisecond), and waits until every one applied the first state.
func (f *benchFleet) startNodes(n int) {
	var mu sync.Mutex
	var errs []error
	sem := make(chan struct{}, 50)
	var started sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		started.Add(1)
		go func() {
			defer started.Done()
			defer func() { <-sem }()
			a, err := f.startNode(fmt.Sprintf("node%04d", i))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			f.agents = append(f.agents, a)
		}()
	}
	started.Wait()
	if len(errs) > 0 {
		f.b.Fatalf("%d of %d agents did not start; the first: %v", len(errs), n, errs[0])
	}
	f.fleet.waitApplied(f.b, f.rev, n)
}

// startNode starts one agent with a client of its own, closed when the
// fleet stops.
func (f *benchFleet) startNode(name string) (*simAgent, error) {
	c, err := etcd.ClientOptions{Endpoints: f.cl.Endpoints()}.Client()
	if err != nil {
		return nil, err
	}
	a, err := newSimAgent(f.ctx, c, f.l, name)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("agent %s: %w", name, err)
	}
	a.client = c
	f.wg.Add(3)
	go func() { defer f.wg.Done(); a.refl.Run(f.ctx) }()
	go func() { defer f.wg.Done(); a.rec.Run(f.ctx) }()
	go func() { defer f.wg.Done(); a.reportOnChange(f.ctx) }()
	return a, nil
}

// reportSettle is how long reportOnChange lets a burst of changes settle,
// as fleet mode's reporter does.
const reportSettle = 10 * time.Millisecond

// reportOnChange is report as fleet mode's reporter does it: it wakes
// when the reflector's revision or the table moves, never on a timer.
func (a *simAgent) reportOnChange(ctx context.Context) {
	var lastReached uint64
	var lastRev statedb.Revision
	ws := statedb.NewWatchSet()
	for {
		reached, moved := a.refl.RevisionWatch()
		txn := a.db.ReadTxn()
		rev := a.table.Revision(txn)
		_, watch := a.table.AllWatch(txn)
		ws.Clear()
		ws.Add(moved, watch)
		if reached > 0 && (reached != lastReached || rev != lastRev) {
			if a.publish(ctx, reached, rev) {
				lastReached, lastRev = reached, rev
			} else if ctx.Err() != nil {
				return
			} else {
				ws.Add(closedAfter(100 * time.Millisecond)) // try again
			}
		}
		if _, err := ws.Wait(ctx, reportSettle); err != nil {
			return
		}
	}
}

// closedAfter returns a channel that closes after d.
func closedAfter(d time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	time.AfterFunc(d, func() { close(ch) })
	return ch
}

// publisherWrites is the status writes of every agent's publisher.
func (f *benchFleet) publisherWrites() int {
	total := 0
	for _, a := range f.agents {
		total += a.pub.Writes()
	}
	return total
}

// profileWindow starts a CPU profile into the file FLEET_SCALE_CPUPROFILE
// names (if set); the returned function stops it.
func profileWindow(b *testing.B) func() {
	path := os.Getenv("FLEET_SCALE_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	out, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		b.Fatal(err)
	}
	return func() { pprof.StopCPUProfile(); out.Close() }
}

// writeHeapProfile writes the heap profile into the file
// FLEET_SCALE_HEAPPROFILE names (if set), once the agents synced.
func writeHeapProfile(b *testing.B) {
	path := os.Getenv("FLEET_SCALE_HEAPPROFILE")
	if path == "" {
		return
	}
	out, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	if err := pprof.Lookup("heap").WriteTo(out, 0); err != nil {
		b.Fatal(err)
	}
}

// raiseOpenFiles raises the soft limit of open files to want (at most the
// hard limit) for the process and the etcd members it starts.
func raiseOpenFiles(b *testing.B, want uint64) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
	if lim.Cur >= want {
		return
	}
	if lim.Max < want {
		b.Fatalf("open files: %d agents need about %d, the hard limit is %d (raise it: ulimit -Hn)", (want-1024)/4, want, lim.Max)
	}
	lim.Cur = want
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
}

// processCPU is the CPU time (user and system) this process used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// membersCPU is the CPU time (user and system, every thread) the
// cluster's member processes used so far, from /proc/PID/stat (in
// USER_HZ, 100 a second on Linux).
func membersCPU(b *testing.B, cl *etcdtest.Cluster) time.Duration {
	var total time.Duration
	for _, m := range cl.Members {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", m.Pid()))
		if err != nil {
			b.Fatalf("CPU time of etcd member %s: %v", m.Name, err)
		}
		// The fields after the command's name (in parentheses, which may
		// hold spaces): state is field 3, utime 14 and stime 15.
		fields := strings.Fields(string(stat[strings.LastIndex(string(stat), ")")+1:]))
		if len(fields) < 13 {
			b.Fatalf("CPU time of etcd member %s: /proc/%d/stat has %d fields after the name", m.Name, m.Pid(), len(fields))
		}
		for _, f := range fields[11:13] {
			ticks, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				b.Fatalf("CPU time of etcd member %s: %v", m.Name, err)
			}
			total += time.Duration(ticks) * 10 * time.Millisecond
		}
	}
	return total
}

// heapInUse is the heap in use after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}
