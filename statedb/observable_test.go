package statedb

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// jobObservable is hive/job's Observable interface, copied: this package
// may not import hive, and TableObservable must satisfy it by its method
// set.
type jobObservable[T any] interface {
	Observe(ctx context.Context, next func(T), complete func(error))
}

var _ jobObservable[Change[*testObject]] = (*TableObservable[*testObject])(nil)

// observed runs Observe in a goroutine and records what it delivers.
type observed struct {
	mu       sync.Mutex
	changes  []Change[*testObject]
	complete []error
	done     chan struct{}
}

func observe(ctx context.Context, o *TableObservable[*testObject], onNext func(Change[*testObject])) *observed {
	rec := &observed{done: make(chan struct{})}
	go o.Observe(ctx, func(c Change[*testObject]) {
		rec.mu.Lock()
		rec.changes = append(rec.changes, c)
		rec.mu.Unlock()
		if onNext != nil {
			onNext(c)
		}
	}, func(err error) {
		rec.mu.Lock()
		rec.complete = append(rec.complete, err)
		rec.mu.Unlock()
		close(rec.done)
	})
	return rec
}

func (r *observed) summary() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.changes {
		out = append(out, fmt.Sprintf("%d:%s:%v", c.Object.ID, c.Object.Name, c.Deleted))
	}
	return out
}

// TestObservableCoalesces: an observer that is slow while an object is
// written a hundred times, another deleted, and a third inserted and
// deleted, gets each of them once: the latest state, or the delete.
// Cancelling the context completes it with ctx's error and releases its
// change iterator.
func TestObservableCoalesces(t *testing.T) {
	db, tbl := newTestTable(t, "objs")
	wtxn := db.WriteTxn(tbl)
	for i := uint64(1); i <= 3; i++ {
		tbl.Insert(wtxn, &testObject{ID: i, Name: "v0"})
	}
	wtxn.Commit()

	blocked, release := make(chan struct{}), make(chan struct{})
	first := true
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := observe(ctx, Observable(db, tbl.ToTable()), func(Change[*testObject]) {
		if first {
			first = false
			close(blocked)
			<-release
		}
	})
	<-blocked
	for v := 1; v <= 100; v++ {
		wtxn := db.WriteTxn(tbl)
		tbl.Insert(wtxn, &testObject{ID: 1, Name: fmt.Sprintf("v%d", v)})
		wtxn.Commit()
	}
	wtxn = db.WriteTxn(tbl)
	tbl.Delete(wtxn, &testObject{ID: 2})
	tbl.Insert(wtxn, &testObject{ID: 4, Name: "v0"})
	wtxn.Commit()
	wtxn = db.WriteTxn(tbl)
	tbl.Delete(wtxn, &testObject{ID: 4})
	wtxn.Commit()
	close(release)

	want := []string{"1:v0:false", "2:v0:false", "3:v0:false", "1:v100:false", "2:v0:true", "4:v0:true"}
	waitFor(t, "the observer to catch up", func() bool { return len(rec.summary()) >= len(want) })
	if got := rec.summary(); !slices.Equal(got, want) {
		t.Fatalf("observed %v, want %v", got, want)
	}
	cancel()
	<-rec.done
	if len(rec.complete) != 1 || !errors.Is(rec.complete[0], context.Canceled) {
		t.Fatalf("complete called with %v, want once with context.Canceled", rec.complete)
	}
	if n := tbl.(anyTable).info(db.ReadTxn()).ChangeIterators; n != 0 {
		t.Fatalf("%d change iterators left after the observer completed", n)
	}
}

// TestObservableChurn: writers insert, replace and delete objects while
// an observer applies what it gets to a map; once the writers are done
// and the observer has caught up, the map equals the table, revisions
// came in order, and no deleted object is kept.
func TestObservableChurn(t *testing.T) {
	db, tbl := newTestTable(t, "objs")
	var mu sync.Mutex
	state := map[uint64]Change[*testObject]{}
	var lastRev Revision
	var orderErr error
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := observe(ctx, Observable(db, tbl.ToTable()), func(c Change[*testObject]) {
		mu.Lock()
		defer mu.Unlock()
		if c.Revision <= lastRev && orderErr == nil {
			orderErr = fmt.Errorf("revision %d after %d", c.Revision, lastRev)
		}
		lastRev = c.Revision
		if c.Deleted {
			delete(state, c.Object.ID)
		} else {
			state[c.Object.ID] = c
		}
	})
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 18))
			for range 300 {
				wtxn := db.WriteTxn(tbl)
				for range r.IntN(5) + 1 {
					id := uint64(r.IntN(40))
					if r.IntN(3) == 0 {
						tbl.Delete(wtxn, &testObject{ID: id})
					} else {
						tbl.Insert(wtxn, &testObject{ID: id, Name: fmt.Sprint(w)})
					}
				}
				wtxn.Commit()
			}
		})
	}
	wg.Wait()
	final := db.ReadTxn()
	waitFor(t, "the observer to catch up", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return lastRev == tbl.Revision(final)
	})
	mu.Lock()
	if orderErr != nil {
		t.Fatal(orderErr)
	}
	want := map[uint64]Change[*testObject]{}
	for o, rev := range tbl.All(final) {
		want[o.ID] = Change[*testObject]{Object: o, Revision: rev}
	}
	if len(state) != len(want) {
		t.Fatalf("observer holds %d objects, the table %d", len(state), len(want))
	}
	for id, c := range want {
		if state[id] != c {
			t.Fatalf("object %d: observed %+v, table %+v", id, state[id], c)
		}
	}
	mu.Unlock()
	// A commit collects what every iterator has passed: nothing is kept.
	db.WriteTxn(tbl).Commit()
	if n := graveyardLen(db, tbl); n != 0 {
		t.Fatalf("%d deleted objects kept after the observer caught up", n)
	}
	cancel()
	<-rec.done
}
