package cilium

import (
	"context"
	"iter"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	ccell "github.com/cilium/hive/cell"
	cjob "github.com/cilium/hive/job"
	cstatedb "github.com/cilium/statedb"
	cindex "github.com/cilium/statedb/index"
	creconciler "github.com/cilium/statedb/reconciler"
	"golang.org/x/time/rate"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// reconcileBatch is the number of objects per write transaction of
// Reconcile, as in cilium's reconciler benchmark.
const reconcileBatch = 1000

// reconcileOnce runs the Reconcile workload on n objects once and returns
// how long it took until every object was Done and the heap in use then.
type reconcileOnce func(tb testing.TB, n int) (time.Duration, uint64)

// BenchmarkReconcile is cilium's reconciler benchmark (a program there):
// per op, a new database and reconciler with a no-op target; N objects
// inserted as Pending (a new StatusPending each, as there) in transactions
// of 1000 and waited for until the last
// one is Done (all are checked afterwards, untimed). It reports objects/sec
// of that and heap-MB, runtime.MemStats.HeapInuse after a GC with the
// table and its reconciler alive.
//
// cilium runs twice: impl=cilium as its program runs it (the reconciler's
// default metrics, expvar maps updated per object), and impl=cilium-lean
// with a no-op Metrics, which is faster and the fairer match for
// steadystate's reconciler, whose default is no metrics.
func BenchmarkReconcile(b *testing.B) {
	n := sized(1_000_000, 100_000)
	b.Run("objects="+strconv.Itoa(n), func(b *testing.B) {
		sides := []side[reconcileOnce]{
			{implSteadystate, func(testing.TB) reconcileOnce { return ssReconcileOnce }},
			{implCilium, func(testing.TB) reconcileOnce { return ciReconcileOnce(false) }},
			{implCiliumLean, func(testing.TB) reconcileOnce { return ciReconcileOnce(true) }},
		}
		compare(b, sides, func(b *testing.B, once reconcileOnce) {
			var total time.Duration
			var heap uint64
			ops := 0
			for b.Loop() {
				var d time.Duration
				d, heap = once(b, n)
				total += d
				ops++
			}
			b.ReportMetric(float64(ops*n)/total.Seconds(), "objects/sec")
			b.ReportMetric(float64(heap)/(1<<20), "heap-MB")
		})
	})
}

// heapInUse returns runtime.MemStats.HeapInuse after a GC, without the
// time it takes when tb is a benchmark.
func heapInUse(tb testing.TB) uint64 {
	if b, ok := tb.(*testing.B); ok {
		b.StopTimer()
		defer b.StartTimer()
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// checkDone fails unless done of n objects are Done and the target saw n
// updates.
func checkDone(tb testing.TB, done, n int, updates int64) {
	if done != n || updates != int64(n) {
		tb.Fatalf("%d of %d objects Done after %d target updates", done, n, updates)
	}
}

// --- steadystate: reconciler.New and Run, as in benchmarks/scaling ---

type ssReconObj struct {
	ID     uint64
	Status reconciler.Status
}

var ssReconID = statedb.Index[*ssReconObj, uint64]{
	Name:       "id",
	FromObject: func(o *ssReconObj) index.KeySet { return index.NewKeySet(index.Uint64(o.ID)) },
	FromKey:    index.Uint64,
	Unique:     true,
}

// ssNopTarget counts updates, as cilium's benchmark's target does.
type ssNopTarget struct{ updates atomic.Int64 }

func (t *ssNopTarget) Update(context.Context, statedb.ReadTxn, *ssReconObj) error {
	t.updates.Add(1)
	return nil
}
func (t *ssNopTarget) Delete(context.Context, statedb.ReadTxn, *ssReconObj) error { return nil }
func (t *ssNopTarget) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*ssReconObj, statedb.Revision]) error {
	return nil
}

func ssReconcileOnce(tb testing.TB, n int) (time.Duration, uint64) {
	db := statedb.New()
	tbl, err := statedb.NewTable(db, "objects", ssReconID)
	if err != nil {
		tb.Fatal(err)
	}
	target := &ssNopTarget{}
	r, err := reconciler.New(db, reconciler.Config[*ssReconObj]{
		Name:            "bench",
		Table:           tbl,
		Target:          target,
		GetObjectStatus: func(o *ssReconObj) reconciler.Status { return o.Status },
		SetObjectStatus: func(o *ssReconObj, s reconciler.Status) *ssReconObj { o.Status = s; return o },
		CloneObject:     func(o *ssReconObj) *ssReconObj { c := *o; return &c },
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); r.Run(ctx) }()
	defer func() { cancel(); <-stopped }()

	start := time.Now()
	for i := 0; i < n; i += reconcileBatch {
		wtxn := db.WriteTxn(tbl)
		for id := i; id < min(i+reconcileBatch, n); id++ {
			_, _, err := tbl.Insert(wtxn, &ssReconObj{ID: uint64(id), Status: reconciler.StatusPending()})
			must(err)
		}
		wtxn.Commit()
	}
	last := ssReconID.Query(uint64(n - 1))
	for {
		o, _, watch, found := tbl.GetWatch(db.ReadTxn(), last)
		if found && o.Status.Kind == reconciler.StatusKindDone {
			break
		}
		<-watch
	}
	elapsed := time.Since(start)

	done := 0
	for o := range tbl.All(db.ReadTxn()) {
		if o.Status.Kind == reconciler.StatusKindDone {
			done++
		}
	}
	heap := heapInUse(tb)
	runtime.KeepAlive(tbl)
	checkDone(tb, done, n, target.updates.Load())
	return elapsed, heap
}

// --- cilium: reconciler.Register in a cilium hive, as its benchmark ---

type ciReconObj struct {
	ID     uint64
	Status creconciler.Status
}

func (o *ciReconObj) TableHeader() []string { return []string{"ID", "Status"} }
func (o *ciReconObj) TableRow() []string {
	return []string{strconv.FormatUint(o.ID, 10), o.Status.String()}
}

var ciReconID = cstatedb.Index[*ciReconObj, uint64]{
	Name:       "id",
	FromObject: func(o *ciReconObj) cindex.KeySet { return cindex.NewKeySet(cindex.Uint64(o.ID)) },
	FromKey:    cindex.Uint64,
	Unique:     true,
}

// ciNopOps counts updates, as the target of cilium's benchmark does.
type ciNopOps struct{ updates atomic.Int64 }

func (t *ciNopOps) Update(context.Context, cstatedb.ReadTxn, cstatedb.Revision, *ciReconObj) error {
	t.updates.Add(1)
	return nil
}
func (t *ciNopOps) Delete(context.Context, cstatedb.ReadTxn, cstatedb.Revision, *ciReconObj) error {
	return nil
}
func (t *ciNopOps) Prune(context.Context, cstatedb.ReadTxn, iter.Seq2[*ciReconObj, cstatedb.Revision]) error {
	return nil
}

// ciNopMetrics replaces the reconciler's default expvar metrics, which
// cost a map update per object, in the lean variant; steadystate's
// reconciler has none by default.
type ciNopMetrics struct{}

func (ciNopMetrics) ReconciliationDuration(ccell.FullModuleID, string, string, time.Duration) {}
func (ciNopMetrics) ReconciliationErrors(ccell.FullModuleID, string, int, int)                {}
func (ciNopMetrics) PruneError(ccell.FullModuleID, string, error)                             {}
func (ciNopMetrics) PruneDuration(ccell.FullModuleID, string, time.Duration)                  {}

// ciReconcileOnce returns the cilium side of Reconcile: with lean, its
// reconciler has a no-op Metrics instead of its default.
func ciReconcileOnce(lean bool) reconcileOnce {
	return func(tb testing.TB, n int) (time.Duration, uint64) { return ciReconcile(tb, n, lean) }
}

func ciReconcile(tb testing.TB, n int, lean bool) (time.Duration, uint64) {
	var (
		db  *cstatedb.DB
		tbl cstatedb.RWTable[*ciReconObj]
		ops = &ciNopOps{}
	)
	opts := []creconciler.Option{creconciler.WithRoundLimits(reconcileBatch, rate.NewLimiter(1000, 10))}
	if lean {
		opts = append(opts, creconciler.WithMetrics(ciNopMetrics{}))
	}
	h := startCiliumHive(tb, ccell.Module("reconcile", "Reconciled objects",
		ccell.Invoke(func(d *cstatedb.DB) (err error) {
			db = d
			tbl, err = cstatedb.NewTable(db, "objects", ciReconID)
			return err
		}),
		ccell.Provide(cjob.Registry.NewGroup),
		ccell.Invoke(func(p creconciler.Params) error {
			_, err := creconciler.Register(p, tbl,
				func(o *ciReconObj) *ciReconObj { c := *o; return &c },
				func(o *ciReconObj, s creconciler.Status) *ciReconObj { o.Status = s; return o },
				func(o *ciReconObj) creconciler.Status { return o.Status },
				ops, nil, opts...)
			return err
		}),
	))
	defer h.stop(tb)

	start := time.Now()
	for i := 0; i < n; i += reconcileBatch {
		wtxn := db.WriteTxn(tbl)
		for id := i; id < min(i+reconcileBatch, n); id++ {
			_, _, err := tbl.Insert(wtxn, &ciReconObj{ID: uint64(id), Status: creconciler.StatusPending()})
			must(err)
		}
		wtxn.Commit()
	}
	last := ciReconID.Query(uint64(n - 1))
	for {
		o, _, watch, found := tbl.GetWatch(db.ReadTxn(), last)
		if found && o.Status.Kind == creconciler.StatusKindDone {
			break
		}
		<-watch
	}
	elapsed := time.Since(start)

	done := 0
	for o := range tbl.All(db.ReadTxn()) {
		if o.Status.Kind == creconciler.StatusKindDone {
			done++
		}
	}
	heap := heapInUse(tb)
	runtime.KeepAlive(tbl)
	checkDone(tb, done, n, ops.updates.Load())
	return elapsed, heap
}
