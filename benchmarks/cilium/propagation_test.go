package cilium

import (
	"iter"
	"testing"
	"time"

	cstatedb "github.com/cilium/statedb"

	"github.com/steadystate/steadystate/statedb"
)

// probeSize is the number of objects of a propagated batch (IDs 0..9).
const probeSize = 10

// BenchmarkPropagationDelay is cilium's BenchmarkDB_PropagationDelay: one
// goroutine propagates a batch of 10 objects from table A to table B by
// hand, one round trip per op (see roundTripper), timed from before the
// commit to A until B's watch channel closed. It reports the round trip's
// p50, p90 and p99 in microseconds and objects/sec.
func BenchmarkPropagationDelay(b *testing.B) {
	pair(b, newSSRoundTrip, newCiliumRoundTrip, func(b *testing.B, rt roundTripper) {
		var lat []time.Duration
		for b.Loop() {
			start := time.Now()
			rt.roundTrip()
			lat = append(lat, time.Since(start))
		}
		reportPercentiles(b, lat)
		b.ReportMetric(float64(len(lat)*probeSize)/b.Elapsed().Seconds(), "objects/sec")
	})
}

// roundTripper is a side of PropagationDelay: tables A and B.
type roundTripper interface {
	// roundTrip commits batch n+1 of probeSize objects to A, waits for A's
	// watch channel (of the previous round's read, closed from the start),
	// takes a snapshot, takes B's AllWatch channel, reads A from the last
	// revision it copied with LowerBoundWatch (keeping the channel for the
	// next round), writes a copy of each object read to B, commits and
	// waits for B's channel.
	roundTrip()
}

// closedWatch is the watch channel of A before the first round.
var closedWatch = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

type ssRoundTrip struct {
	*ssDB
	n      int
	rev    statedb.Revision
	watchA <-chan struct{}
}

func newSSRoundTrip(tb testing.TB) roundTripper {
	return &ssRoundTrip{ssDB: newSSDB(tb, "a", "b"), watchA: closedWatch}
}

func (s *ssRoundTrip) roundTrip() {
	a, b := s.tables[0], s.tables[1]
	s.n++
	wtxn := s.db.WriteTxn(a)
	for i := range probeSize {
		_, _, err := a.Insert(wtxn, &object{ID: uint64(i), Batch: s.n})
		must(err)
	}
	wtxn.Commit()
	<-s.watchA

	txn := s.db.ReadTxn()
	_, watchB := b.AllWatch(txn)
	var seq iter.Seq2[*object, statedb.Revision]
	seq, s.watchA = a.LowerBoundWatch(txn, statedb.ByRevision[*object](s.rev))
	wtxn = s.db.WriteTxn(b)
	for o := range seq {
		cp := *o
		_, _, err := b.Insert(wtxn, &cp)
		must(err)
	}
	wtxn.Commit()
	s.rev = a.Revision(txn)
	<-watchB
}

type ciRoundTrip struct {
	*ciDB
	n      int
	rev    cstatedb.Revision
	watchA <-chan struct{}
}

func newCiliumRoundTrip(tb testing.TB) roundTripper {
	return &ciRoundTrip{ciDB: newCiDB(tb, "a", "b"), watchA: closedWatch}
}

func (c *ciRoundTrip) roundTrip() {
	a, b := c.tables[0], c.tables[1]
	c.n++
	wtxn := c.db.WriteTxn(a)
	for i := range probeSize {
		_, _, err := a.Insert(wtxn, &object{ID: uint64(i), Batch: c.n})
		must(err)
	}
	wtxn.Commit()
	<-c.watchA

	txn := c.db.ReadTxn()
	_, watchB := b.AllWatch(txn)
	var seq iter.Seq2[*object, cstatedb.Revision]
	seq, c.watchA = a.LowerBoundWatch(txn, cstatedb.ByRevision[*object](c.rev))
	wtxn = c.db.WriteTxn(b)
	for o := range seq {
		cp := *o
		_, _, err := b.Insert(wtxn, &cp)
		must(err)
	}
	wtxn.Commit()
	c.rev = a.Revision(txn)
	<-watchB
}
