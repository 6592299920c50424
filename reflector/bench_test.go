package reflector_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/steadystate/steadystate/reflector"
)

// benchSource lists n objects in three tables, then its watch sends what
// the benchmark puts on events.
type benchSource struct {
	n      int
	events chan reflector.Event[int]
}

func (s *benchSource) List(context.Context) ([]reflector.Item[int], uint64, error) {
	items := make([]reflector.Item[int], 0, s.n)
	for i := range s.n {
		items = append(items, reflector.Item[int]{Table: multiTables[i%3], Key: fmt.Sprintf("k%07d", i), Value: i + 1})
	}
	return items, 1, nil
}

func (s *benchSource) Watch(context.Context, uint64) (<-chan reflector.Event[int], error) {
	return s.events, nil
}

// BenchmarkMulti measures a reflector of three tables: the first list of
// 30,000 objects, then changes of one object per revision as an etcd
// watch sends them (a Progress after each response of 100 revisions),
// each committed to the tables.
func BenchmarkMulti(b *testing.B) {
	b.Run("list-30k", func(b *testing.B) {
		for b.Loop() {
			src := &benchSource{n: 30000, events: make(chan reflector.Event[int])}
			f := newMultiFixture(b, src, 0, time.Hour, nil)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); f.multi.Run(ctx) }()
			for f.multi.Revision() == 0 {
				time.Sleep(10 * time.Microsecond)
			}
			cancel()
			<-done
		}
		b.ReportMetric(float64(30000*b.N)/b.Elapsed().Seconds(), "objects/sec")
	})
	b.Run("watch", func(b *testing.B) {
		src := &benchSource{n: 3000, events: make(chan reflector.Event[int], 128)}
		f := newMultiFixture(b, src, 0, time.Hour, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); f.multi.Run(ctx) }()
		defer func() { cancel(); <-done }()
		for f.multi.Revision() == 0 {
			time.Sleep(10 * time.Microsecond)
		}
		rev := uint64(1)
		n := 0
		for b.Loop() {
			rev++
			n++
			src.events <- reflector.Event[int]{Kind: reflector.Put, Table: multiTables[n%3], Key: fmt.Sprintf("k%07d", n%3000), Value: n*7 + 1, Revision: rev}
			if n%100 == 0 {
				src.events <- reflector.Event[int]{Kind: reflector.Progress, Revision: rev}
			}
		}
		src.events <- reflector.Event[int]{Kind: reflector.Progress, Revision: rev}
		for f.multi.Revision() < rev {
			time.Sleep(10 * time.Microsecond)
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "objects/sec")
	})
}
