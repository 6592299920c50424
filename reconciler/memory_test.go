package reconciler

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/steadystate/steadystate/statedb"
)

// TestMemoryUnderChurn runs a reconciler whose status writes interleave with
// the commits of a writer of its table and of a writer of another table,
// for tens of thousands of commits over a fixed set of keys: the live heap
// after GC must not grow with the number of commits (statedb's "Memory
// depends on live data", in the shape a real program has).
func TestMemoryUnderChurn(t *testing.T) {
	commits := 20_000
	if testing.Short() {
		commits /= 4
	}
	db := statedb.New()
	tbl, err := statedb.NewTable(db, "objs", benchID)
	if err != nil {
		t.Fatal(err)
	}
	other, err := statedb.NewTable(db, "other", benchID)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := New(db, Config[*benchObj]{
		Name:            "churn",
		Table:           tbl,
		Target:          nopTarget{},
		GetObjectStatus: func(o *benchObj) Status { return o.Status },
		SetObjectStatus: func(o *benchObj, s Status) *benchObj { o.Status = s; return o },
		CloneObject:     func(o *benchObj) *benchObj { c := *o; return &c },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rec.Run(ctx) }()
	defer func() { cancel(); <-done }()

	write := func(i int) {
		wtxn := db.WriteTxn(tbl)
		for k := range 10 {
			tbl.Insert(wtxn, &benchObj{ID: uint64((i*10 + k) % 1000), Status: StatusPending()})
		}
		rev := tbl.Revision(wtxn)
		wtxn.Commit()
		wtxn = db.WriteTxn(other)
		for k := range 10 {
			other.Insert(wtxn, &benchObj{ID: uint64((i*10 + k) % 1000)})
		}
		wtxn.Commit()
		// Wait now and then, so that status writes really interleave and
		// the reconciler does not just batch everything at the end.
		if i%20 == 0 {
			wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
			if _, err := rec.WaitUntilReconciled(wctx, rev); err != nil {
				t.Fatalf("WaitUntilReconciled: %v", err)
			}
			wcancel()
		}
	}
	warm := commits / 10
	var base uint64
	for i := range commits {
		if i == warm {
			base = liveHeap()
		}
		write(i)
	}
	end := liveHeap()
	runtime.KeepAlive(tbl)
	grown := int64(end) - int64(base)
	t.Logf("%d commits: live heap %d KB after warm-up, %d KB at the end", 2*commits, base>>10, end>>10)
	if grown > 1<<20 {
		t.Fatalf("live heap grew by %d KB over %d commits of constant live data (%d bytes/commit)",
			grown>>10, 2*(commits-warm), grown/int64(2*(commits-warm)))
	}
}

// liveHeap returns the bytes of live heap after a full collection.
func liveHeap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
