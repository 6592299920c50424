package job_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/job"
)

func TestObserver(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name      string
		values    []int
		src       func(ch chan int) job.Observable[int]
		failOn    int
		keepOpen  bool // do not close the source
		wantLevel cell.Level
		wantMsg   string
	}{
		{name: "completes", values: []int{1, 2, 3}, wantLevel: cell.LevelStopped, wantMsg: "source completed"},
		{name: "handler error degrades", values: []int{1, 2, 3}, failOn: 3, keepOpen: true, wantLevel: cell.LevelDegraded, wantMsg: "handling a value failed"},
		{
			name:   "source error degrades",
			values: []int{1, 2, 3},
			src: func(ch chan int) job.Observable[int] {
				return job.ObserveFunc[int](func(ctx context.Context, next func(int), complete func(error)) {
					job.FromChannel(ch).Observe(ctx, next, func(error) { complete(boom) })
				})
			},
			wantLevel: cell.LevelDegraded, wantMsg: "source failed",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch := make(chan int, len(tt.values))
			for _, v := range tt.values {
				ch <- v
			}
			if !tt.keepOpen {
				close(ch)
			}
			src := job.FromChannel(ch)
			if tt.src != nil {
				src = tt.src(ch)
			}
			var mu sync.Mutex
			var got []int
			h := startJobs(t, job.Observer("obs", func(_ context.Context, v int) error {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, v)
				if v == tt.failOn {
					return boom
				}
				return nil
			}, src))
			waitLevel(t, h, "m.obs", tt.wantLevel, tt.wantMsg)
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(got, tt.values) {
				t.Fatalf("observed %v, want %v", got, tt.values)
			}
		})
	}
}

func TestObserverStopsWithHive(t *testing.T) {
	ch := make(chan int) // never closed: only the hive stop ends the job
	var got sync.WaitGroup
	got.Add(1)
	h := startJobs(t, job.Observer("endless", func(context.Context, int) error {
		got.Done()
		return nil
	}, job.FromChannel(ch)))
	ch <- 1
	got.Wait()
	waitLevel(t, h, "m.endless", cell.LevelOK, "observing")
	// t.Cleanup stops the hive; goleak checks that the job returned.
}
