package statedb

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/steadystate/steadystate/index"
)

// propObj is the object of the propagation benchmark.
type propObj struct {
	ID    uint64
	Batch int
}

var propID = Index[*propObj, uint64]{
	Name:       "id",
	FromObject: func(o *propObj) index.KeySet { return index.NewKeySet(index.Uint64(o.ID)) },
	FromKey:    index.Uint64,
	Unique:     true,
}

// BenchmarkPropagationDelay: a writer commits batches of 10 objects to table
// A, a Deriver copies them to table B, and a reader measures the time from
// the commit to the batch being visible in B. One batch is in flight at a
// time, so this is the latency of an idle pipeline.
func BenchmarkPropagationDelay(b *testing.B) {
	db := New()
	a, _ := NewTable(db, "a", propID)
	tb, _ := NewTable(db, "b", propID)
	d, err := NewDeriver(db, a.ToTable(), tb, func(o *propObj, deleted bool) (*propObj, DeriveResult) {
		if deleted {
			return o, DeriveDelete
		}
		return o, DeriveInsert
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); d.Run(ctx) }()

	// The reader waits for the last object of each batch to show up in B
	// and tells when it saw it. It learns which batch to wait for before the
	// commit, so that handing it over is not part of the measured time.
	batches := make(chan int)
	seen := make(chan time.Time)
	go func() {
		defer wg.Done()
		for n := range batches {
			for {
				o, _, watch, found := tb.GetWatch(db.ReadTxn(), propID.Query(9))
				if found && o.Batch == n {
					seen <- time.Now()
					break
				}
				<-watch
			}
		}
	}()

	var lat []time.Duration
	n := 0
	for b.Loop() {
		n++
		wtxn := db.WriteTxn(a)
		for i := range 10 {
			a.Insert(wtxn, &propObj{ID: uint64(i), Batch: n})
		}
		batches <- n
		committed := time.Now()
		wtxn.Commit()
		lat = append(lat, (<-seen).Sub(committed))
	}
	close(batches)
	cancel()
	wg.Wait()
	reportPercentiles(b, lat)
	b.ReportMetric(float64(n*10)/b.Elapsed().Seconds(), "objects/sec")
}

// reportPercentiles reports p50, p90 and p99 of lat in microseconds.
func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(float64(len(lat))*p))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(at(0.50), "p50-us")
	b.ReportMetric(at(0.90), "p90-us")
	b.ReportMetric(at(0.99), "p99-us")
}

// BenchmarkChangeFeed measures reading the changes of a round that replaced
// 1000 objects, through a ChangeIterator (impl=changes) against iterating
// the revision index from the previous round's revision
// (impl=revision-index, the baseline, which cannot see deletes).
// objects/sec counts the reading only (timed with the clock: stopping the
// benchmark timer around every round would make b.Loop run far more rounds);
// ns/op includes writing the round.
func BenchmarkChangeFeed(b *testing.B) {
	const objects = 1000
	setup := func(b *testing.B) (*DB, RWTable[*propObj]) {
		db := New()
		tbl, _ := NewTable(db, "objs", propID)
		return db, tbl
	}
	round := func(db *DB, tbl RWTable[*propObj], n int) {
		wtxn := db.WriteTxn(tbl)
		for i := range objects {
			tbl.Insert(wtxn, &propObj{ID: uint64(i), Batch: n})
		}
		wtxn.Commit()
	}
	b.Run("impl=changes", func(b *testing.B) {
		db, tbl := setup(b)
		wtxn := db.WriteTxn(tbl)
		iter, _ := tbl.Changes(wtxn)
		wtxn.Commit()
		defer iter.Close()
		count, n := 0, 0
		var reading time.Duration
		for b.Loop() {
			n++
			round(db, tbl, n)
			start := time.Now()
			changes, _ := iter.Next(db.ReadTxn())
			for range changes {
				count++
			}
			reading += time.Since(start)
		}
		if count != n*objects {
			b.Fatalf("saw %d changes, want %d", count, n*objects)
		}
		b.ReportMetric(float64(count)/reading.Seconds(), "objects/sec")
	})
	b.Run("impl=revision-index", func(b *testing.B) {
		db, tbl := setup(b)
		var next Revision
		count, n := 0, 0
		var reading time.Duration
		for b.Loop() {
			n++
			round(db, tbl, n)
			start := time.Now()
			txn := db.ReadTxn()
			for range tbl.LowerBound(txn, ByRevision[*propObj](next)) {
				count++
			}
			next = tbl.Revision(txn) + 1
			reading += time.Since(start)
		}
		if count != n*objects {
			b.Fatalf("saw %d objects, want %d", count, n*objects)
		}
		b.ReportMetric(float64(count)/reading.Seconds(), "objects/sec")
	})
}
