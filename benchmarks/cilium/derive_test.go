package cilium

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ccell "github.com/cilium/hive/cell"
	cjob "github.com/cilium/hive/job"
	cstatedb "github.com/cilium/statedb"

	"github.com/steadystate/steadystate/statedb"
)

const (
	// loadBatch and loadKeys shape the heavy load: batches of 100 objects
	// cycling over 10k keys that do not overlap the probe's.
	loadBatch = 100
	loadKeys  = 10_000
	// probeTimeout bounds one probe, so that a lost wake-up fails the run
	// instead of hanging it.
	probeTimeout = 10 * time.Second
)

// BenchmarkDerive measures the delay from the commit of a batch of 10
// objects to table A until each side's own deriver has made the batch
// visible in table B, as benchmarks/scaling's BenchmarkPropagation does for
// steadystate alone: p50, p90 and p99 in microseconds, and objects/sec.
//
//   - load=light: one batch in flight at a time and no other writer.
//   - load=heavy: meanwhile another writer commits batches of 100 objects
//     to A back to back, so every probe queues behind it for A's lock and
//     the deriver copies its objects too; load-objects/sec is what it
//     wrote.
func BenchmarkDerive(b *testing.B) {
	for _, load := range []string{"light", "heavy"} {
		heavy := load == "heavy"
		b.Run("load="+load, func(b *testing.B) {
			pair(b, newSSDerive, newCiliumDerive, func(b *testing.B, side deriveSide) {
				p := startPipeline(side, heavy)
				defer p.stop()
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
				if heavy {
					b.ReportMetric(float64(written)/b.Elapsed().Seconds(), "load-objects/sec")
				}
			})
		})
	}
}

// deriveSide is a side of Derive: tables A and B and a deriver, started by
// the constructor and stopped when the benchmark ends, that copies every
// object of A to B.
type deriveSide interface {
	// beginProbe writes probe batch n (IDs 0..probeSize-1) to A in a write
	// transaction that commitProbe commits.
	beginProbe(n int)
	commitProbe()
	// probeSeen reports whether the last object of probe batch n is in B,
	// and returns a channel that closes when that object changes.
	probeSeen(n int) (bool, <-chan struct{})
	// load commits load batch k (loadBatch objects) to A.
	load(k int)
}

// loadID is the ID of the j-th object of load batch k.
func loadID(k, j int) uint64 { return probeSize + uint64((k*loadBatch+j)%loadKeys) }

// pipeline drives a deriveSide: the probes, a reader that waits for each
// probe batch in B and, under heavy load, the load writer.
type pipeline struct {
	side    deriveSide
	batch   int
	probes  chan int       // the batch the reader waits for
	seen    chan time.Time // when the reader saw it in B
	timeout *time.Timer
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	written atomic.Int64 // objects written by the load writer
	stopped bool
}

// startPipeline starts the reader and, with heavy, the load writer; stop
// stops them.
func startPipeline(side deriveSide, heavy bool) *pipeline {
	ctx, cancel := context.WithCancel(context.Background())
	p := &pipeline{
		side: side, probes: make(chan int), seen: make(chan time.Time),
		timeout: time.NewTimer(time.Hour), ctx: ctx, cancel: cancel,
	}
	p.timeout.Stop()
	p.wg.Add(1)
	go func() { defer p.wg.Done(); p.read() }()
	if heavy {
		p.wg.Add(1)
		go func() { defer p.wg.Done(); p.loadUntilStopped() }()
	}
	return p
}

// probe commits one probe batch to A and returns the time until the
// reader saw it in B.
func (p *pipeline) probe() (time.Duration, error) {
	p.batch++
	p.side.beginProbe(p.batch)
	// The reader learns which batch to wait for before the commit, so that
	// handing it over is not part of the measured time.
	p.probes <- p.batch
	committed := time.Now()
	p.side.commitProbe()
	p.timeout.Reset(probeTimeout)
	select {
	case seenAt := <-p.seen:
		p.timeout.Stop()
		return seenAt.Sub(committed), nil
	case <-p.timeout.C:
		p.cancel() // unblocks the reader
		return 0, fmt.Errorf("batch %d not visible in table b after %v (lost watch wake-up?)", p.batch, probeTimeout)
	}
}

// read waits, for each probe batch, until its last object is in B.
func (p *pipeline) read() {
	for n := range p.probes {
		for {
			ok, watch := p.side.probeSeen(n)
			if ok {
				select {
				case p.seen <- time.Now():
				case <-p.ctx.Done():
					return
				}
				break
			}
			select {
			case <-watch:
			case <-p.ctx.Done():
				return
			}
		}
	}
}

// loadUntilStopped commits load batches to A back to back.
func (p *pipeline) loadUntilStopped() {
	for k := 0; p.ctx.Err() == nil; k++ {
		p.side.load(k)
		p.written.Add(loadBatch)
	}
}

// stop stops the reader and the load writer and returns the number of
// objects the load writer wrote. It may be called more than once.
func (p *pipeline) stop() int64 {
	if !p.stopped {
		p.stopped = true
		close(p.probes)
		p.cancel()
		p.wg.Wait()
	}
	return p.written.Load()
}

// ssDerive is steadystate's side: a statedb.Deriver run by a goroutine of
// its own.
type ssDerive struct {
	*ssDB
	wtxn      statedb.WriteTxn
	lastProbe statedb.Query[*object]
}

func newSSDerive(tb testing.TB) deriveSide {
	s := &ssDerive{ssDB: newSSDB(tb, "a", "b"), lastProbe: ssID.Query(probeSize - 1)}
	d, err := statedb.NewDeriver(s.db, s.tables[0].ToTable(), s.tables[1],
		func(o *object, deleted bool) (*object, statedb.DeriveResult) {
			if deleted {
				return o, statedb.DeriveDelete
			}
			return o, statedb.DeriveInsert
		})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Error(err)
		}
	})
	return s
}

func (s *ssDerive) beginProbe(n int) {
	s.wtxn = s.db.WriteTxn(s.tables[0])
	for i := range probeSize {
		_, _, err := s.tables[0].Insert(s.wtxn, &object{ID: uint64(i), Batch: n})
		must(err)
	}
}

func (s *ssDerive) commitProbe() { s.wtxn.Commit() }

func (s *ssDerive) probeSeen(n int) (bool, <-chan struct{}) {
	o, _, watch, found := s.tables[1].GetWatch(s.db.ReadTxn(), s.lastProbe)
	return found && o.Batch == n, watch
}

func (s *ssDerive) load(k int) {
	wtxn := s.db.WriteTxn(s.tables[0])
	for j := range loadBatch {
		_, _, err := s.tables[0].Insert(wtxn, &object{ID: loadID(k, j), Batch: k})
		must(err)
	}
	wtxn.Commit()
}

// ciDerive is cilium's side: statedb.Derive registered as a job of a
// cilium hive, the way cilium's users derive one table from another.
type ciDerive struct {
	db        *cstatedb.DB
	a, b      cstatedb.RWTable[*object]
	wtxn      cstatedb.WriteTxn
	lastProbe cstatedb.Query[*object]
}

func newCiliumDerive(tb testing.TB) deriveSide {
	c := &ciDerive{lastProbe: ciID.Query(probeSize - 1)}
	tables := func(db *cstatedb.DB) (cstatedb.Table[*object], cstatedb.RWTable[*object], error) {
		c.db = db
		var err error
		if c.a, err = cstatedb.NewTable(db, "a", ciID); err != nil {
			return nil, nil, err
		}
		if c.b, err = cstatedb.NewTable(db, "b", ciID); err != nil {
			return nil, nil, err
		}
		return c.a.ToTable(), c.b, nil
	}
	h := startCiliumHive(tb, ccell.Module("derive", "Table b derived from table a",
		ccell.Provide(tables, cjob.Registry.NewGroup),
		ccell.Invoke(cstatedb.Derive("derive-a-to-b",
			func(o *object, deleted bool) (*object, cstatedb.DeriveResult) {
				if deleted {
					return o, cstatedb.DeriveDelete
				}
				return o, cstatedb.DeriveInsert
			})),
	))
	tb.Cleanup(func() { h.stop(tb) })
	return c
}

func (c *ciDerive) beginProbe(n int) {
	c.wtxn = c.db.WriteTxn(c.a)
	for i := range probeSize {
		_, _, err := c.a.Insert(c.wtxn, &object{ID: uint64(i), Batch: n})
		must(err)
	}
}

func (c *ciDerive) commitProbe() { c.wtxn.Commit() }

func (c *ciDerive) probeSeen(n int) (bool, <-chan struct{}) {
	o, _, watch, found := c.b.GetWatch(c.db.ReadTxn(), c.lastProbe)
	return found && o.Batch == n, watch
}

func (c *ciDerive) load(k int) {
	wtxn := c.db.WriteTxn(c.a)
	for j := range loadBatch {
		_, _, err := c.a.Insert(wtxn, &object{ID: loadID(k, j), Batch: k})
		must(err)
	}
	wtxn.Commit()
}
