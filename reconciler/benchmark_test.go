package reconciler

import (
	"context"
	"iter"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/statedb"
)

// benchObj is the object of the throughput benchmark.
type benchObj struct {
	ID     uint64
	Status Status
}

var benchID = statedb.Index[*benchObj, uint64]{
	Name:       "id",
	FromObject: func(o *benchObj) index.KeySet { return index.NewKeySet(index.Uint64(o.ID)) },
	FromKey:    index.Uint64,
	Unique:     true,
}

type nopTarget struct{}

func (nopTarget) Update(context.Context, statedb.ReadTxn, *benchObj) error { return nil }
func (nopTarget) Delete(context.Context, statedb.ReadTxn, *benchObj) error { return nil }
func (nopTarget) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*benchObj, statedb.Revision]) error {
	return nil
}

// BenchmarkReconcile inserts N objects in batches of 1000 into a table with
// a no-op target and measures until every object is Done: objects/sec and
// the heap in use afterwards (with the table still alive). N=1000000 runs
// when STEADYSTATE_BENCH_1M=1 (see also benchmarks/cmd/reconcile1m).
func BenchmarkReconcile(b *testing.B) {
	sizes := []int{10_000, 100_000}
	if os.Getenv("STEADYSTATE_BENCH_1M") == "1" {
		sizes = append(sizes, 1_000_000)
	}
	for _, n := range sizes {
		b.Run("objects="+strconv.Itoa(n), func(b *testing.B) {
			var heap uint64
			for b.Loop() {
				heap = reconcileOnce(b, n)
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "objects/sec")
			b.ReportMetric(float64(heap)/(1<<20), "heap-MB")
		})
	}
}

// reconcileOnce runs one round of BenchmarkReconcile and returns the heap in
// use once everything is Done.
func reconcileOnce(b *testing.B, n int) uint64 {
	return reconcileWith(b, n, Config[*benchObj]{Target: nopTarget{}})
}

// reconcileWith inserts n objects in batches of 1000 and reconciles them
// with cfg's Target and Workers, and returns the heap in use once
// everything is Done.
func reconcileWith(b *testing.B, n int, cfg Config[*benchObj]) uint64 {
	db := statedb.New()
	tbl, err := statedb.NewTable(db, "objs", benchID)
	if err != nil {
		b.Fatal(err)
	}
	r, err := New(db, Config[*benchObj]{
		Name:            "bench",
		Table:           tbl,
		Target:          cfg.Target,
		Workers:         cfg.Workers,
		GetObjectStatus: func(o *benchObj) Status { return o.Status },
		SetObjectStatus: func(o *benchObj, s Status) *benchObj { o.Status = s; return o },
		CloneObject:     func(o *benchObj) *benchObj { c := *o; return &c },
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); r.Run(ctx) }()

	pending := StatusPending()
	var rev statedb.Revision
	for i := 0; i < n; i += 1000 {
		wtxn := db.WriteTxn(tbl)
		for j := i; j < min(i+1000, n); j++ {
			tbl.Insert(wtxn, &benchObj{ID: uint64(j), Status: pending})
		}
		rev = tbl.Revision(wtxn.Commit())
	}
	if _, err := r.WaitUntilReconciled(ctx, rev); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	txn := db.ReadTxn()
	done := 0
	for o := range tbl.All(txn) {
		if o.Status.Kind == StatusKindDone {
			done++
		}
	}
	if done != n {
		b.Fatalf("%d of %d objects Done", done, n)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	runtime.KeepAlive(tbl)
	cancel()
	wg.Wait()
	b.StartTimer()
	return ms.HeapInuse
}

// latencyTarget is a target whose every Update and Delete takes latency,
// like a netlink round trip or an API call.
type latencyTarget struct {
	nopTarget
	latency time.Duration
}

func (l latencyTarget) Update(context.Context, statedb.ReadTxn, *benchObj) error {
	time.Sleep(l.latency)
	return nil
}

// BenchmarkWorkers reconciles 10,000 objects (1,000 with -short) against a
// target with 1 ms of latency per call, with 1, 4, 16 and 64 workers:
// objects/sec. With one worker a reconciler is capped near 1000 objects/s
// whatever the machine; the target is at least 10x that with 16.
func BenchmarkWorkers(b *testing.B) {
	n := 10_000
	if testing.Short() {
		n = 1_000
	}
	for _, workers := range []int{1, 4, 16, 64} {
		b.Run("impl=workers-"+strconv.Itoa(workers), func(b *testing.B) {
			for b.Loop() {
				reconcileWith(b, n, Config[*benchObj]{Target: latencyTarget{latency: time.Millisecond}, Workers: workers})
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "objects/sec")
		})
	}
}
