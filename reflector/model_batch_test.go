package reflector_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/steadystate/steadystate/reflector"
)

// replaySource is a multiSource whose every watch starts up to back
// revisions before the one asked for (as a source that reconnects from an
// older revision): the reflector gets events and Progress of revisions it
// already holds, then the new ones.
type replaySource struct {
	*multiSource
	back uint64
}

func (s replaySource) Watch(ctx context.Context, after uint64) (<-chan reflector.Event[int], error) {
	s.mu.Lock()
	from := after
	if after > s.compacted+s.back {
		from = after - s.back // still in the history: no Resync
	}
	s.mu.Unlock()
	return s.multiSource.Watch(ctx, from)
}

// The model test of the multi-table reflector at its tightest settings:
// BatchSize 1 (a flush at every revision boundary), the default
// BatchInterval (the timer live, not an hour away), a source that
// duplicates and reorders the events of a revision, replays revisions
// after every reconnect, loses watches, compacts and fails lists, and
// transactions of up to 8 keys. After every commit, and whenever another
// goroutine looks, the tables hold the source's state at one revision at
// or past Revision; at the end, the latest state at the source's revision.
//
// The commit hook does real work (it computes the source's state), and
// every 8th commit takes longer than BatchInterval, as a large batch on a
// loaded machine or a slow Transform would. The source never pauses within
// a revision of its own: while the reflector commits, it waits to send.
func TestMultiModelBatchOne(t *testing.T) {
	for seed := range uint64(2) {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1234))
			src := newMultiSource(seed + 100)
			randomTxn := func(step int) []mop {
				var ops []mop
				seen := map[tk]bool{}
				for range 1 + rng.IntN(8) {
					k := tk{multiTables[rng.IntN(3)], fmt.Sprintf("k%02d", rng.IntN(12))}
					if seen[k] {
						continue
					}
					seen[k] = true
					ops = append(ops, mop{tk: k, del: rng.IntN(4) == 0, val: step*10 + rng.IntN(10)})
				}
				return ops
			}
			for i := range 10 {
				src.commit(randomTxn(i))
			}
			var mu sync.Mutex
			var failure error
			fail := func(err error) {
				mu.Lock()
				defer mu.Unlock()
				if failure == nil {
					failure = err
				}
			}
			var f *multiFixture
			commits := 0
			hook := &commitHook{after: func() {
				mu.Lock()
				failed := failure != nil
				mu.Unlock()
				if failed {
					return // checked enough
				}
				if commits++; commits%8 == 0 {
					// Now and then a commit as slow as a large batch on a
					// loaded machine: longer than BatchInterval.
					time.Sleep(reflector.DefaultBatchInterval + 10*time.Millisecond)
				}
				if err := f.check(t, src); err != nil {
					fail(fmt.Errorf("after a commit: %w", err))
				}
			}}
			f = newMultiFixture(t, replaySource{multiSource: src, back: 3}, 1, reflector.DefaultBatchInterval, hook)
			f.run(t)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err := f.check(t, src); err != nil {
						fail(fmt.Errorf("seen by a reader: %w", err))
						return
					}
					time.Sleep(100 * time.Microsecond)
				}
			})
			for step := range 600 {
				switch n := rng.IntN(100); {
				case n < 1:
					src.loseWatches()
				case n < 2:
					src.mu.Lock()
					src.compacted = src.rev
					src.mu.Unlock()
					src.loseWatches()
				case n < 3:
					src.mu.Lock()
					src.failList = 2
					src.mu.Unlock()
				case n < 10:
					src.commit(nil)
				default:
					src.commit(randomTxn(step + 10))
				}
				if step%4 == 0 {
					time.Sleep(time.Millisecond) // the reflector keeps up, commit by commit

				}
			}
			want := src.revision()
			deadline := time.Now().Add(15 * time.Second)
			for f.multi.Revision() < want {
				if time.Now().After(deadline) {
					t.Fatalf("Revision %d, want %d after 15s", f.multi.Revision(), want)
				}
				time.Sleep(time.Millisecond)
			}
			close(stop)
			wg.Wait()
			if failure != nil {
				t.Fatal(failure)
			}
			if got, exp := f.snapshot(f.db.ReadTxn()), src.at(want); !maps.Equal(got, exp) || f.multi.Revision() != want {
				t.Fatalf("at the end: Revision %d, tables %v\nwant %d, %v", f.multi.Revision(), got, want, exp)
			}
		})
	}
}
