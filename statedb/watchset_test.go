package statedb

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func newChans(n int) []chan struct{} {
	out := make([]chan struct{}, n)
	for i := range out {
		out[i] = make(chan struct{})
	}
	return out
}

func recvOnly(chans []chan struct{}) []<-chan struct{} {
	out := make([]<-chan struct{}, len(chans))
	for i, ch := range chans {
		out[i] = ch
	}
	return out
}

// sameSet compares two lists of channels as sets.
func sameSet(a, b []<-chan struct{}) bool {
	if len(a) != len(b) {
		return false
	}
	for _, ch := range a {
		if !slices.Contains(b, ch) {
			return false
		}
	}
	return true
}

// Sizes around the plain selects (up to 4), the index (16) and beyond.
var watchSetSizes = []int{1, 2, 3, 4, 5, 15, 16, 17, 100}

// TestWatchSetClosedBeforeWait: channels already closed are all returned
// at once and leave the set; the rest stay.
func TestWatchSetClosedBeforeWait(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range watchSetSizes {
		t.Run("n="+strconv.Itoa(n), func(t *testing.T) {
			chans := newChans(n)
			ws := NewWatchSet()
			ws.Add(recvOnly(chans)...)
			ws.Add(recvOnly(chans)...) // duplicates are kept once
			if ws.Len() != n {
				t.Fatalf("Len = %d, want %d", ws.Len(), n)
			}
			var want []<-chan struct{}
			for _, i := range r.Perm(n)[:1+r.IntN(n)] {
				close(chans[i])
				want = append(want, chans[i])
			}
			got, err := ws.Wait(context.Background(), 0)
			if err != nil || !sameSet(got, want) {
				t.Fatalf("Wait = %d channels, %v; want the %d closed", len(got), err, len(want))
			}
			if ws.Len() != n-len(want) {
				t.Fatalf("Len after Wait = %d, want %d", ws.Len(), n-len(want))
			}
			for _, ch := range want {
				if ws.Has(ch) {
					t.Fatal("a returned channel is still in the set")
				}
			}
		})
	}
}

// TestWatchSetBlocks: Wait blocks until a channel closes, exactly as long
// as that takes (synctest's clock), for every size.
func TestWatchSetBlocks(t *testing.T) {
	for _, n := range watchSetSizes {
		t.Run("n="+strconv.Itoa(n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				chans := newChans(n)
				ws := NewWatchSet()
				ws.Add(recvOnly(chans)...)
				last := chans[n-1]
				go func() {
					time.Sleep(time.Second)
					close(last)
				}()
				start := time.Now()
				got, err := ws.Wait(context.Background(), 0)
				if err != nil || !sameSet(got, []<-chan struct{}{last}) {
					t.Fatalf("Wait = %v, %v; want the last channel", got, err)
				}
				if d := time.Since(start); d != time.Second {
					t.Fatalf("Wait returned after %v, want 1s", d)
				}
			})
		})
	}
}

// TestWatchSetSettle: with a settle time, channels that close within it
// after the first are returned too; later ones are left for the next Wait.
func TestWatchSetSettle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		chans := newChans(10)
		ws := NewWatchSet()
		ws.Add(recvOnly(chans)...)
		closeAt := func(ch chan struct{}, d time.Duration) {
			go func() { time.Sleep(d); close(ch) }()
		}
		closeAt(chans[3], time.Second)
		closeAt(chans[7], 1500*time.Millisecond)
		closeAt(chans[1], 3*time.Second)
		start := time.Now()
		got, err := ws.Wait(context.Background(), time.Second)
		if err != nil || !sameSet(got, []<-chan struct{}{chans[3], chans[7]}) {
			t.Fatalf("Wait = %d channels, %v; want chans 3 and 7", len(got), err)
		}
		if d := time.Since(start); d != 2*time.Second {
			t.Fatalf("Wait with settle returned after %v, want 2s", d)
		}
		got, err = ws.Wait(context.Background(), time.Second)
		if err != nil || !sameSet(got, []<-chan struct{}{chans[1]}) {
			t.Fatalf("second Wait = %d channels, %v; want chan 1", len(got), err)
		}
		if ws.Len() != 7 {
			t.Fatalf("Len = %d, want 7", ws.Len())
		}
	})
}

// TestWatchSetContext: a context that ends first is the error (wrapped,
// with the number of channels), and the set is unchanged; a context that
// ends while settling cuts the settling short without an error.
func TestWatchSetContext(t *testing.T) {
	for _, n := range []int{1, 4, 5, 100} {
		t.Run("n="+strconv.Itoa(n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ws := NewWatchSet()
				ws.Add(recvOnly(newChans(n))...)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				start := time.Now()
				got, err := ws.Wait(ctx, time.Second)
				if !errors.Is(err, context.DeadlineExceeded) || got != nil {
					t.Fatalf("Wait = %v, %v; want context.DeadlineExceeded", got, err)
				}
				if want := strconv.Itoa(n) + " watch channels"; !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
				if d := time.Since(start); d != 5*time.Second {
					t.Fatalf("Wait returned after %v, want 5s", d)
				}
				if ws.Len() != n {
					t.Fatalf("Len = %d after a cancelled Wait, want %d", ws.Len(), n)
				}
			})
		})
	}
	synctest.Test(t, func(t *testing.T) {
		chans := newChans(3)
		ws := NewWatchSet()
		ws.Add(recvOnly(chans)...)
		close(chans[0])
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		got, err := ws.Wait(ctx, time.Hour)
		if err != nil || !sameSet(got, []<-chan struct{}{chans[0]}) {
			t.Fatalf("Wait = %v, %v; want chan 0 and no error", got, err)
		}
		if d := time.Since(start); d != 100*time.Millisecond {
			t.Fatalf("settling ended after %v, want 100ms (the context)", d)
		}
	})
}

// TestWatchSetEmpty: an empty set (nil channels are not added) is an
// error at once; Clear empties a set.
func TestWatchSetEmpty(t *testing.T) {
	ws := NewWatchSet()
	ws.Add(nil, nil)
	if ws.Len() != 0 {
		t.Fatalf("Len = %d after adding nil channels", ws.Len())
	}
	if got, err := ws.Wait(context.Background(), time.Hour); !errors.Is(err, ErrWatchSetEmpty) || got != nil {
		t.Fatalf("Wait on an empty set = %v, %v; want ErrWatchSetEmpty", got, err)
	}
	ws.Add(recvOnly(newChans(20))...)
	ws.Clear()
	if ws.Len() != 0 {
		t.Fatalf("Len = %d after Clear", ws.Len())
	}
	if _, err := ws.Wait(context.Background(), 0); !errors.Is(err, ErrWatchSetEmpty) {
		t.Fatalf("Wait after Clear: %v, want ErrWatchSetEmpty", err)
	}
}

// TestWatchSetHuge: a set larger than one reflect.Select takes is waited
// on in chunks; a channel of every chunk is seen, and the chunks'
// goroutines end with the Wait (synctest and goleak would see them).
func TestWatchSetHuge(t *testing.T) {
	n := 2*maxSelectCases + 10
	for _, which := range []int{0, maxSelectCases - 2, maxSelectCases - 1, maxSelectCases, n - 1} {
		t.Run("closing="+strconv.Itoa(which), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				chans := newChans(n)
				ws := NewWatchSet()
				ws.Add(recvOnly(chans)...)
				go func() {
					time.Sleep(time.Second)
					close(chans[which])
				}()
				got, err := ws.Wait(context.Background(), 0)
				if err != nil || !sameSet(got, []<-chan struct{}{chans[which]}) {
					t.Fatalf("Wait = %d channels, %v; want channel %d", len(got), err, which)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				if _, err := ws.Wait(ctx, 0); !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("second Wait: %v, want context.DeadlineExceeded", err)
				}
			})
		})
	}
}

// TestWatchSetConcurrent: writers commit to tables and add the watch
// channels of their reads while a waiter waits; every channel closed is
// returned exactly once (run with -race).
func TestWatchSetConcurrent(t *testing.T) {
	db, tbl := newTestTable(t, "objs")
	ws := NewWatchSet()
	const writers, rounds = 4, 50
	var mu sync.Mutex
	added := map[<-chan struct{}]bool{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range rounds {
				id := uint64(w*rounds + i)
				_, _, ch, _ := tbl.GetWatch(db.ReadTxn(), idIndex.Query(id))
				mu.Lock()
				added[ch] = true
				mu.Unlock()
				ws.Add(ch)
				wtxn := db.WriteTxn(tbl)
				tbl.Insert(wtxn, &testObject{ID: id})
				wtxn.Commit()
			}
		})
	}
	// The waiter waits on the writers' channels and on done, which closes
	// when the writers are finished; by then every channel they added is
	// closed, and one more Wait returns the rest.
	done := make(chan struct{})
	ws.Add(done)
	go func() { wg.Wait(); close(done) }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	seen := map[<-chan struct{}]int{}
	for finished := false; !finished; {
		got, err := ws.Wait(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range got {
			if ch == done {
				finished = true
			} else {
				seen[ch]++
			}
		}
	}
	if ws.Len() > 0 {
		got, err := ws.Wait(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range got {
			seen[ch]++
		}
	}
	if ws.Len() != 0 {
		t.Fatalf("%d channels left in the set after every writer committed", ws.Len())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != len(added) {
		t.Fatalf("%d channels returned, %d added", len(seen), len(added))
	}
	for ch := range added {
		if seen[ch] != 1 {
			t.Fatalf("a channel was returned %d times, want once", seen[ch])
		}
	}
}

// BenchmarkWatchSet waits on a set of N channels, one of which is closed:
// per op, the closed channel is added again and Wait returns it.
func BenchmarkWatchSet(b *testing.B) {
	for _, n := range []int{1, 10, 100, 1000} {
		b.Run("chans="+strconv.Itoa(n), func(b *testing.B) {
			ws := NewWatchSet()
			ws.Add(recvOnly(newChans(n - 1))...)
			closed := make(chan struct{})
			close(closed)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				ws.Add(closed)
				got, err := ws.Wait(ctx, 0)
				if err != nil || len(got) != 1 {
					b.Fatalf("Wait = %d channels, %v", len(got), err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "waits/sec")
		})
	}
}
