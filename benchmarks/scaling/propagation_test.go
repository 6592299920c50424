package scaling

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/statedb"
)

// propObj is the object of the propagation workload.
type propObj struct {
	ID    uint64
	Batch int
}

var propID = statedb.Index[*propObj, uint64]{
	Name:       "id",
	FromObject: func(o *propObj) index.KeySet { return index.NewKeySet(index.Uint64(o.ID)) },
	FromKey:    index.Uint64,
	Unique:     true,
}

const (
	// probeSize is the number of objects of each timed batch (IDs 0..9).
	probeSize = 10
	// loadBatch and loadKeys shape the heavy load: batches of 100 objects
	// cycling over 10k keys that do not overlap the probe's.
	loadBatch = 100
	loadKeys  = 10_000
)

// BenchmarkPropagation measures the delay from the commit of a batch of 10
// objects to table A until a Deriver (a job that copies A to B) has made the
// batch visible in table B, and reports its p50, p90 and p99 in
// microseconds.
//
//   - load=light: one batch in flight at a time and no other writer; the
//     latency of an idle pipeline (statedb's BenchmarkPropagationDelay).
//   - load=heavy: meanwhile another writer commits batches of 100 objects to
//     A back to back, so every probe queues behind it for A's lock and the
//     Deriver copies its objects too; load-objects/sec is what it wrote.
func BenchmarkPropagation(b *testing.B) {
	for _, load := range []string{"light", "heavy"} {
		b.Run("load="+load, func(b *testing.B) {
			p := newPipeline(b, load == "heavy")
			defer p.stop()
			b.ReportAllocs()
			var lat []time.Duration
			for b.Loop() {
				d, err := p.probe()
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, d)
			}
			written := p.stop()
			reportPercentiles(b, lat)
			b.ReportMetric(float64(len(lat)*probeSize)/b.Elapsed().Seconds(), "objects/sec")
			if load == "heavy" {
				b.ReportMetric(float64(written)/b.Elapsed().Seconds(), "load-objects/sec")
			}
		})
	}
}

// pipeline is table A, its copy B kept by a Deriver, a reader that waits
// for each probe batch in B and, under heavy load, a writer of A.
type pipeline struct {
	db      *statedb.DB
	a, b    statedb.RWTable[*propObj]
	batch   int
	probes  chan probeBatch
	seen    chan time.Time // when the reader saw the batch in B
	timeout *time.Timer    // a probe that takes longer fails the benchmark
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	written atomic.Int64 // objects written by the load writer
	stopped bool
}

type probeBatch struct {
	n int
}

// newPipeline starts the Deriver, the reader and, with heavy, the load
// writer; stop stops them.
func newPipeline(tb testing.TB, heavy bool) *pipeline {
	db := statedb.New()
	a, err := statedb.NewTable(db, "a", propID)
	if err != nil {
		tb.Fatal(err)
	}
	tblB, err := statedb.NewTable(db, "b", propID)
	if err != nil {
		tb.Fatal(err)
	}
	d, err := statedb.NewDeriver(db, a.ToTable(), tblB, func(o *propObj, deleted bool) (*propObj, statedb.DeriveResult) {
		if deleted {
			return o, statedb.DeriveDelete
		}
		return o, statedb.DeriveInsert
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &pipeline{
		db: db, a: a, b: tblB,
		probes: make(chan probeBatch), seen: make(chan time.Time),
		timeout: time.NewTimer(time.Hour), cancel: cancel,
	}
	p.timeout.Stop()
	p.wg.Add(2)
	go func() { defer p.wg.Done(); d.Run(ctx) }()
	go func() { defer p.wg.Done(); p.read(ctx) }()
	if heavy {
		p.wg.Add(1)
		go func() { defer p.wg.Done(); p.load(ctx) }()
	}
	return p
}

// probeTimeout bounds one probe, so that a lost wake-up fails the run
// instead of hanging it.
const probeTimeout = 10 * time.Second

// probe commits one batch of probeSize objects to A and returns the time
// until the last of them was seen in B.
func (p *pipeline) probe() (time.Duration, error) {
	p.batch++
	wtxn := p.db.WriteTxn(p.a)
	for i := range probeSize {
		if _, _, err := p.a.Insert(wtxn, &propObj{ID: uint64(i), Batch: p.batch}); err != nil {
			panic(err)
		}
	}
	// The reader learns which batch to wait for before the commit, so that
	// handing it over is not part of the measured time.
	pb := probeBatch{n: p.batch}
	p.probes <- pb
	committed := time.Now()
	wtxn.Commit()
	p.timeout.Reset(probeTimeout)
	select {
	case seenAt := <-p.seen:
		p.timeout.Stop()
		return seenAt.Sub(committed), nil
	case <-p.timeout.C:
		p.cancel() // unblocks the reader
		return 0, fmt.Errorf("batch %d not visible in table b after %v (lost watch wake-up?)", pb.n, probeTimeout)
	}
}

// read waits, for each probe batch, until its last object is in B.
func (p *pipeline) read(ctx context.Context) {
	for pb := range p.probes {
		for {
			o, _, watch, found := p.b.GetWatch(p.db.ReadTxn(), propID.Query(probeSize-1))
			if found && o.Batch == pb.n {
				select {
				case p.seen <- time.Now():
				case <-ctx.Done():
					return
				}
				break
			}
			select {
			case <-watch:
			case <-ctx.Done():
				return
			}
		}
	}
}

// load commits batches of loadBatch objects to A back to back until ctx is
// cancelled.
func (p *pipeline) load(ctx context.Context) {
	for k := 0; ctx.Err() == nil; k++ {
		wtxn := p.db.WriteTxn(p.a)
		for j := range loadBatch {
			id := probeSize + uint64((k*loadBatch+j)%loadKeys)
			if _, _, err := p.a.Insert(wtxn, &propObj{ID: id, Batch: k}); err != nil {
				panic(err)
			}
		}
		wtxn.Commit()
		p.written.Add(loadBatch)
	}
}

// stop stops every goroutine of p and returns the number of objects the
// load writer wrote. It may be called more than once.
func (p *pipeline) stop() int64 {
	if !p.stopped {
		p.stopped = true
		close(p.probes)
		p.cancel()
		p.wg.Wait()
	}
	return p.written.Load()
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
