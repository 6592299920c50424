package cilium

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkFloor measures the least a commit of an MVCC database with
// watch channels can do, as a yardstick for both sides: publish a new root
// (under a writers' mutex, one atomic pointer store of a new root that
// carries a new watch channel) and close the old root's channel.
//
//   - op=commit: one such commit per op, nobody waiting: the floor of
//     WriteTxn/batch=1.
//   - op=roundtrip: PropagationDelay's round trip in one goroutine with
//     nothing but such commits: commit to root A, wait for A's channel,
//     load the roots, commit to B, wait for B's channel. p50/p90/p99 in
//     microseconds: the floor of PropagationDelay.
//   - op=wake: a commit that wakes one reader blocked on the old channel,
//     in another goroutine: p50/p90/p99 of the time from before the commit
//     until the reader runs, the floor of Derive/load=light. Each op waits
//     until the reader is blocked again, so that every commit wakes it.
func BenchmarkFloor(b *testing.B) {
	b.Run("op=commit", func(b *testing.B) {
		f := newFloorDB()
		b.ReportAllocs()
		for b.Loop() {
			f.commit()
		}
	})
	b.Run("op=roundtrip", func(b *testing.B) {
		a, z := newFloorDB(), newFloorDB()
		b.ReportAllocs()
		var lat []time.Duration
		for b.Loop() {
			start := time.Now()
			lat = append(lat, floorRoundTrip(a, z, start))
		}
		reportPercentiles(b, lat)
	})
	b.Run("op=wake", func(b *testing.B) {
		f := newFloorDB()
		w := startFloorReader(f)
		defer w.stop()
		b.ReportAllocs()
		var lat []time.Duration
		for b.Loop() {
			lat = append(lat, w.wake())
		}
		reportPercentiles(b, lat)
	})
}

// floorRoot is what a floor commit publishes.
type floorRoot struct {
	watch chan struct{}
	at    time.Time // when the commit that published it began
}

// floorDB is a database reduced to its commit: a root and a writers' lock.
type floorDB struct {
	mu   sync.Mutex
	root atomic.Pointer[floorRoot]
}

func newFloorDB() *floorDB {
	f := &floorDB{}
	f.root.Store(&floorRoot{watch: make(chan struct{})})
	return f
}

// commit publishes a new root and closes the old root's channel after the
// store, as a database does so that a woken reader sees the new root.
func (f *floorDB) commit() { f.commitAt(time.Time{}) }

func (f *floorDB) commitAt(at time.Time) {
	f.mu.Lock()
	old := f.root.Load()
	f.root.Store(&floorRoot{watch: make(chan struct{}), at: at})
	f.mu.Unlock()
	close(old.watch)
}

// floorRoundTrip commits to a and waits for it, then commits to z and
// waits for that, and returns the time since start.
func floorRoundTrip(a, z *floorDB, start time.Time) time.Duration {
	watchA := a.root.Load().watch
	a.commit()
	<-watchA
	watchZ := z.root.Load().watch
	_ = a.root.Load()
	z.commit()
	<-watchZ
	return time.Since(start)
}

// floorReader is a goroutine that waits on the root's channel of a floorDB
// and, woken, reports how long after the commit's start it ran.
type floorReader struct {
	f     *floorDB
	woken chan time.Duration
	done  chan struct{}
	wg    sync.WaitGroup
}

func startFloorReader(f *floorDB) *floorReader {
	w := &floorReader{f: f, woken: make(chan time.Duration), done: make(chan struct{})}
	w.wg.Add(1)
	watch := f.root.Load().watch // before the first commit can come
	go func() {
		defer w.wg.Done()
		for {
			select {
			case <-watch:
			case <-w.done:
				return
			}
			root := f.root.Load()
			d := time.Since(root.at)
			// The next channel is taken before reporting: the next
			// commit comes only after the report.
			watch = root.watch
			select {
			case w.woken <- d:
			case <-w.done:
				return
			}
		}
	}()
	return w
}

// wake commits and returns the reader's delay. The reader takes the new
// root's channel before it reports, so the next commit closes the channel
// it waits on (or is about to).
func (w *floorReader) wake() time.Duration {
	w.f.commitAt(time.Now())
	return <-w.woken
}

func (w *floorReader) stop() {
	close(w.done)
	w.wg.Wait()
}
