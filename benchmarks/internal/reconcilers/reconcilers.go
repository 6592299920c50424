// Package reconcilers runs the reconciler workload of cilium's reconciler
// benchmark (a program of its own there) on steadystate's reconciler and on
// cilium's, for benchmarks/cilium (the pair at 1M objects) and
// benchmarks/scaling (the series from 1k to 1M): a new database and
// reconciler with a no-op target; N objects inserted as Pending (a new
// StatusPending each, as there) in committed transactions of 1000; then a
// wait until the last object is Done. Every object is checked to be Done,
// untimed.
package reconcilers

import (
	"context"
	"iter"
	"log/slog"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	chive "github.com/cilium/hive"
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

// Batch is the number of objects per write transaction, as in cilium's
// program.
const Batch = 1000

// Run runs the workload on n objects once and returns how long it took
// until every object was Done and the heap in use then
// (runtime.MemStats.HeapInuse after a GC, with the table and its
// reconciler alive; the GC is untimed when tb is a benchmark).
type Run func(tb testing.TB, n int) (time.Duration, uint64)

// HeapInUse returns runtime.MemStats.HeapInuse after a GC, without the
// time it takes when tb is a benchmark.
func HeapInUse(tb testing.TB) uint64 {
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

// --- steadystate: reconciler.New and Run ---

type ssObj struct {
	ID     uint64
	Status reconciler.Status
}

var ssID = statedb.Index[*ssObj, uint64]{
	Name:       "id",
	FromObject: func(o *ssObj) index.KeySet { return index.NewKeySet(index.Uint64(o.ID)) },
	FromKey:    index.Uint64,
	Unique:     true,
}

// ssNopTarget counts updates, as cilium's program's target does.
type ssNopTarget struct{ updates atomic.Int64 }

func (t *ssNopTarget) Update(context.Context, statedb.ReadTxn, *ssObj) error {
	t.updates.Add(1)
	return nil
}
func (t *ssNopTarget) Delete(context.Context, statedb.ReadTxn, *ssObj) error { return nil }
func (t *ssNopTarget) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*ssObj, statedb.Revision]) error {
	return nil
}

// Steadystate runs the workload on steadystate's reconciler, with its
// defaults (no metrics).
func Steadystate(tb testing.TB, n int) (time.Duration, uint64) {
	db := statedb.New()
	tbl, err := statedb.NewTable(db, "objects", ssID)
	if err != nil {
		tb.Fatal(err)
	}
	target := &ssNopTarget{}
	r, err := reconciler.New(db, reconciler.Config[*ssObj]{
		Name:            "bench",
		Table:           tbl,
		Target:          target,
		GetObjectStatus: func(o *ssObj) reconciler.Status { return o.Status },
		SetObjectStatus: func(o *ssObj, s reconciler.Status) *ssObj { o.Status = s; return o },
		CloneObject:     func(o *ssObj) *ssObj { c := *o; return &c },
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); r.Run(ctx) }()
	defer func() { cancel(); <-stopped }()

	start := time.Now()
	for i := 0; i < n; i += Batch {
		wtxn := db.WriteTxn(tbl)
		for id := i; id < min(i+Batch, n); id++ {
			if _, _, err := tbl.Insert(wtxn, &ssObj{ID: uint64(id), Status: reconciler.StatusPending()}); err != nil {
				tb.Fatal(err)
			}
		}
		wtxn.Commit()
	}
	last := ssID.Query(uint64(n - 1))
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
	heap := HeapInUse(tb)
	runtime.KeepAlive(tbl)
	checkDone(tb, done, n, target.updates.Load())
	return elapsed, heap
}

// --- cilium: reconciler.Register in a cilium hive, as its program ---

type ciObj struct {
	ID     uint64
	Status creconciler.Status
}

// TableHeader and TableRow make ciObj storable in cilium's tables.
func (o *ciObj) TableHeader() []string { return []string{"ID", "Status"} }
func (o *ciObj) TableRow() []string {
	return []string{strconv.FormatUint(o.ID, 10), o.Status.String()}
}

var ciID = cstatedb.Index[*ciObj, uint64]{
	Name:       "id",
	FromObject: func(o *ciObj) cindex.KeySet { return cindex.NewKeySet(cindex.Uint64(o.ID)) },
	FromKey:    cindex.Uint64,
	Unique:     true,
}

// ciNopOps counts updates, as the target of cilium's program does.
type ciNopOps struct{ updates atomic.Int64 }

func (t *ciNopOps) Update(context.Context, cstatedb.ReadTxn, cstatedb.Revision, *ciObj) error {
	t.updates.Add(1)
	return nil
}
func (t *ciNopOps) Delete(context.Context, cstatedb.ReadTxn, cstatedb.Revision, *ciObj) error {
	return nil
}
func (t *ciNopOps) Prune(context.Context, cstatedb.ReadTxn, iter.Seq2[*ciObj, cstatedb.Revision]) error {
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

// Cilium returns the workload on cilium's reconciler, registered in a
// cilium hive (statedb, job and simple health cells) with the round limits
// of its program (1000 objects, 1000 rounds a second, burst 10): as the
// program runs it (the reconciler's default metrics), or with lean a no-op
// Metrics instead.
func Cilium(lean bool) Run {
	return func(tb testing.TB, n int) (time.Duration, uint64) { return cilium(tb, n, lean) }
}

func cilium(tb testing.TB, n int, lean bool) (time.Duration, uint64) {
	var (
		db  *cstatedb.DB
		tbl cstatedb.RWTable[*ciObj]
		ops = &ciNopOps{}
	)
	opts := []creconciler.Option{creconciler.WithRoundLimits(Batch, rate.NewLimiter(1000, 10))}
	if lean {
		opts = append(opts, creconciler.WithMetrics(ciNopMetrics{}))
	}
	h := chive.New(
		ccell.SimpleHealthCell,
		cstatedb.Cell,
		cjob.Cell,
		ccell.Module("reconcile", "Reconciled objects",
			ccell.Invoke(func(d *cstatedb.DB) (err error) {
				db = d
				tbl, err = cstatedb.NewTable(db, "objects", ciID)
				return err
			}),
			ccell.Provide(cjob.Registry.NewGroup),
			ccell.Invoke(func(p creconciler.Params) error {
				_, err := creconciler.Register(p, tbl,
					func(o *ciObj) *ciObj { c := *o; return &c },
					func(o *ciObj, s creconciler.Status) *ciObj { o.Status = s; return o },
					func(o *ciObj) creconciler.Status { return o.Status },
					ops, nil, opts...)
				return err
			}),
		))
	log := slog.New(slog.DiscardHandler)
	if err := h.Start(log, context.Background()); err != nil {
		tb.Fatal(err)
	}
	defer func() {
		if err := h.Stop(log, context.Background()); err != nil {
			tb.Error(err)
		}
	}()

	start := time.Now()
	for i := 0; i < n; i += Batch {
		wtxn := db.WriteTxn(tbl)
		for id := i; id < min(i+Batch, n); id++ {
			if _, _, err := tbl.Insert(wtxn, &ciObj{ID: uint64(id), Status: creconciler.StatusPending()}); err != nil {
				tb.Fatal(err)
			}
		}
		wtxn.Commit()
	}
	last := ciID.Query(uint64(n - 1))
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
	heap := HeapInUse(tb)
	runtime.KeepAlive(tbl)
	checkDone(tb, done, n, ops.updates.Load())
	return elapsed, heap
}
