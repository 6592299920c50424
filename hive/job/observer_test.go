package job_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/steadystate/steadystate/hive/health"
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
		wantLevel health.Level
		wantMsg   string
	}{
		{name: "completes", values: []int{1, 2, 3}, wantLevel: health.LevelStopped, wantMsg: "source completed"},
		{name: "handler error degrades", values: []int{1, 2, 3}, failOn: 3, keepOpen: true, wantLevel: health.LevelDegraded, wantMsg: "handling a value failed"},
		{name: "handler success heals", values: []int{1, 2, 3}, failOn: 2, keepOpen: true, wantLevel: health.LevelOK, wantMsg: "observing"},
		{
			name:   "source error degrades",
			values: []int{1, 2, 3},
			src: func(ch chan int) job.Observable[int] {
				return job.ObserveFunc[int](func(ctx context.Context, next func(int), complete func(error)) {
					job.FromChannel(ch).Observe(ctx, next, func(error) { complete(boom) })
				})
			},
			wantLevel: health.LevelDegraded, wantMsg: "source failed",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
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
				synctest.Wait()
				wantLevel(t, h, "m.obs", tt.wantLevel, tt.wantMsg)
				mu.Lock()
				defer mu.Unlock()
				if !slices.Equal(got, tt.values) {
					t.Fatalf("observed %v, want %v", got, tt.values)
				}
			})
		})
	}
}

func TestObserverStopsWithHive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := make(chan int) // never closed: only the hive stop ends the job
		var got int
		h := startJobs(t, job.Observer("endless", func(_ context.Context, v int) error {
			got = v
			return nil
		}, job.FromChannel(ch)))
		ch <- 1
		synctest.Wait()
		if got != 1 {
			t.Fatalf("observed %d, want 1", got)
		}
		wantLevel(t, h, "m.endless", health.LevelOK, "observing")
		// hivetest stops the hive when the test ends; the bubble fails the
		// test if the job's goroutine did not return.
	})
}
