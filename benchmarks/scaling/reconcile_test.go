package scaling

import (
	"context"
	"iter"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// reconObj is the object of the reconciler workload.
type reconObj struct {
	ID     uint64
	Status reconciler.Status
}

var reconID = statedb.Index[*reconObj, uint64]{
	Name:       "id",
	FromObject: func(o *reconObj) index.KeySet { return index.NewKeySet(index.Uint64(o.ID)) },
	FromKey:    index.Uint64,
	Unique:     true,
}

type nopTarget struct{}

func (nopTarget) Update(context.Context, statedb.ReadTxn, *reconObj) error { return nil }
func (nopTarget) Delete(context.Context, statedb.ReadTxn, *reconObj) error { return nil }
func (nopTarget) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*reconObj, statedb.Revision]) error {
	return nil
}

// BenchmarkReconcile is the workload of reconciler's BenchmarkReconcile at
// every size: insert N Pending objects in transactions of 1000 into a table
// with a no-op target and wait until every object is Done. It reports
// objects/sec and ns/object of that, and the heap in use afterwards
// (runtime.MemStats.HeapInuse after a GC, with the table alive) in MB and
// per object.
func BenchmarkReconcile(b *testing.B) {
	forEachSize(b, func(b *testing.B, n int) {
		var total time.Duration
		var heap uint64
		ops := 0
		for b.Loop() {
			var d time.Duration
			d, heap = reconcileOnce(b, n)
			total += d
			ops++
		}
		reportPerObject(b, ops*n, float64(total.Nanoseconds()))
		b.ReportMetric(float64(heap)/(1<<20), "heap-MB")
		b.ReportMetric(float64(heap)/float64(n), "heap-B/object")
	})
}

// reconcileOnce runs the workload once and returns how long it took until
// every object was Done, and the heap in use then.
func reconcileOnce(tb testing.TB, n int) (time.Duration, uint64) {
	db := statedb.New()
	tbl, err := statedb.NewTable(db, "objs", reconID)
	if err != nil {
		tb.Fatal(err)
	}
	r, err := reconciler.New(db, reconciler.Config[*reconObj]{
		Name:            "bench",
		Table:           tbl,
		Target:          nopTarget{},
		GetObjectStatus: func(o *reconObj) reconciler.Status { return o.Status },
		SetObjectStatus: func(o *reconObj, s reconciler.Status) *reconObj { o.Status = s; return o },
		CloneObject:     func(o *reconObj) *reconObj { c := *o; return &c },
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); r.Run(ctx) }()
	defer func() { cancel(); wg.Wait() }()

	start := time.Now()
	pending := reconciler.StatusPending()
	var rev statedb.Revision
	for i := 0; i < n; i += batchSize {
		wtxn := db.WriteTxn(tbl)
		for id := i; id < min(i+batchSize, n); id++ {
			if _, _, err := tbl.Insert(wtxn, &reconObj{ID: uint64(id), Status: pending}); err != nil {
				tb.Fatal(err)
			}
		}
		rev = tbl.Revision(wtxn.Commit())
	}
	if _, err := r.WaitUntilReconciled(ctx, rev); err != nil {
		tb.Fatal(err)
	}
	elapsed := time.Since(start)

	if b, ok := tb.(*testing.B); ok {
		b.StopTimer()
		defer b.StartTimer()
	}
	done := 0
	for o := range tbl.All(db.ReadTxn()) {
		if o.Status.Kind == reconciler.StatusKindDone {
			done++
		}
	}
	if done != n {
		tb.Fatalf("%d of %d objects Done", done, n)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	runtime.KeepAlive(tbl)
	return elapsed, ms.HeapInuse
}
