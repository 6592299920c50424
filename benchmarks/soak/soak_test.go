package soak

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"iter"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/internal/memtest"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

var (
	duration = flag.Duration("soak.duration", 0, "how long to run the soak (0: skip it)")
	every    = flag.Duration("soak.every", time.Minute, "how often to print the live heap")
	slackMB  = flag.Int("soak.slack-mb", 8, "allowed live-heap growth after the warm-up, in MB")
)

// object is a desired object of any of the three tables: a key, a value the
// loader changes, and the reconciler's status.
type object struct {
	Key    string
	Value  int
	Status reconciler.Status
}

var byKey = statedb.Index[*object, string]{
	Name:       "key",
	FromObject: func(o *object) index.KeySet { return index.NewKeySet(index.String(o.Key)) },
	FromKey:    index.String,
	Unique:     true,
}

var byStatus = reconciler.StatusIndex(func(o *object) reconciler.Status { return o.Status })

// tableShape is one desired-state table: its name and how many objects the
// loader keeps in it (some come and go).
type tableShape struct {
	name string
	size int
}

var shapes = []tableShape{{"sysctls", 20}, {"routes", 2000}, {"rules", 300}}

// memTarget is an in-memory real system. With failEvery > 0, about one
// Update in failEvery fails, so that retries are part of the shape.
type memTarget struct {
	mu        sync.Mutex
	applied   map[string]int
	failEvery int
	ops       atomic.Int64
}

var errInjected = errors.New("injected failure")

func (t *memTarget) Update(_ context.Context, _ statedb.ReadTxn, o *object) error {
	t.ops.Add(1)
	if t.failEvery > 0 && rand.IntN(t.failEvery) == 0 {
		return errInjected
	}
	t.mu.Lock()
	t.applied[o.Key] = o.Value
	t.mu.Unlock()
	return nil
}

func (t *memTarget) Delete(_ context.Context, _ statedb.ReadTxn, o *object) error {
	t.ops.Add(1)
	t.mu.Lock()
	delete(t.applied, o.Key)
	t.mu.Unlock()
	return nil
}

func (t *memTarget) Prune(_ context.Context, _ statedb.ReadTxn, desired iter.Seq2[*object, statedb.Revision]) error {
	keep := map[string]bool{}
	for o := range desired {
		keep[o.Key] = true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.applied {
		if !keep[k] {
			delete(t.applied, k)
		}
	}
	return nil
}

func TestSoak(t *testing.T) {
	if *duration == 0 {
		t.Skip("run with -soak.duration (make soak)")
	}
	db := statedb.New()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	run := func(f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil {
				t.Error(err)
			}
		}()
	}

	var tables []statedb.RWTable[*object]
	var targets []*memTarget
	for i, s := range shapes {
		tbl, err := statedb.NewTable(db, s.name, byKey, byStatus)
		if err != nil {
			t.Fatal(err)
		}
		target := &memTarget{applied: map[string]int{}}
		if i == 1 {
			target.failEvery = 100
		}
		rec, err := reconciler.New(db, reconciler.Config[*object]{
			Name: s.name, Table: tbl, Target: target,
			GetObjectStatus:            func(o *object) reconciler.Status { return o.Status },
			SetObjectStatus:            func(o *object, st reconciler.Status) *object { o.Status = st; return o },
			CloneObject:                func(o *object) *object { c := *o; return &c },
			FullReconciliationInterval: 5 * time.Second,
			RetryBackoffMin:            10 * time.Millisecond,
			RetryBackoffMax:            time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		run(rec.Run)
		tables = append(tables, tbl)
		targets = append(targets, target)
	}

	// A Deriver keeps a summary of the routes, as a program with a derived
	// table would.
	summary, err := statedb.NewTable(db, "route-summary", byKey)
	if err != nil {
		t.Fatal(err)
	}
	d, err := statedb.NewDeriver(db, tables[1].ToTable(), summary, func(o *object, deleted bool) (*object, statedb.DeriveResult) {
		if deleted {
			return &object{Key: o.Key}, statedb.DeriveDelete
		}
		return &object{Key: o.Key, Value: o.Value}, statedb.DeriveInsert
	})
	if err != nil {
		t.Fatal(err)
	}
	run(d.Run)
	defer d.Close()

	// A follower of the rules, like the agent's progress log.
	wtxn := db.WriteTxn(tables[2])
	follow, err := tables[2].Changes(wtxn)
	wtxn.Commit()
	if err != nil {
		t.Fatal(err)
	}
	defer follow.Close()
	run(func(ctx context.Context) error {
		for {
			changes, watch := follow.Next(db.ReadTxn())
			for range changes {
			}
			select {
			case <-ctx.Done():
				return nil
			case <-watch:
			}
		}
	})

	writers := make([]reconciler.DesiredWriter[*object], len(tables))
	for i, tbl := range tables {
		writers[i] = reconciler.DesiredWriter[*object]{
			Table:           tbl,
			Equal:           func(a, b *object) bool { return a.Key == b.Key && a.Value == b.Value },
			SetObjectStatus: func(o *object, st reconciler.Status) *object { o.Status = st; return o },
		}
	}
	var loads atomic.Int64
	load := func(gen int) {
		metas := []statedb.TableMeta{tables[0], tables[1], tables[2]}
		wtxn := db.WriteTxn(metas[0], metas[1:]...)
		defer wtxn.Abort()
		rng := rand.New(rand.NewPCG(uint64(gen), 7))
		for i, s := range shapes {
			// Each load changes about 5% of the values and leaves out
			// (deletes) about 2% of the keys, which come back later.
			for k := range s.size {
				o := &object{Key: fmt.Sprintf("%s-%d", s.name, k), Value: (gen / 20) + k%7}
				if rng.IntN(20) == 0 {
					o.Value += gen
				}
				if rng.IntN(50) == 0 {
					writers[i].Delete(wtxn, o)
					continue
				}
				if _, err := writers[i].Upsert(wtxn, o); err != nil {
					t.Error(err)
				}
			}
		}
		wtxn.Commit()
		loads.Add(1)
	}

	start := time.Now()
	warmUp := min(*duration/10, time.Minute)
	var base uint64
	nextPrint := start
	for gen := 0; time.Since(start) < *duration; gen++ {
		load(gen)
		time.Sleep(20 * time.Millisecond)
		now := time.Now()
		if base == 0 && now.Sub(start) >= warmUp {
			base = liveHeap()
			t.Logf("warm-up over after %v: live heap %.1f MB", now.Sub(start).Round(time.Second), mb(base))
		}
		if now.After(nextPrint) {
			nextPrint = now.Add(*every)
			var ops int64
			for _, tg := range targets {
				ops += tg.ops.Load()
			}
			t.Logf("%8v  live heap %6.1f MB  loads %7d  target ops %9d  revisions %v  goroutines %d",
				now.Sub(start).Round(time.Second), mb(liveHeap()), loads.Load(), ops, revisions(db, tables, summary), runtime.NumGoroutine())
		}
	}
	end := liveHeap()
	t.Logf("end after %v: live heap %.1f MB (after warm-up %.1f MB), %d loads", time.Since(start).Round(time.Second), mb(end), mb(base), loads.Load())
	if base > 0 && end > base+uint64(*slackMB)<<20 {
		t.Fatalf("live heap grew from %.1f MB to %.1f MB with constant live data", mb(base), mb(end))
	}
}

func revisions(db *statedb.DB, tables []statedb.RWTable[*object], summary statedb.RWTable[*object]) []statedb.Revision {
	txn := db.ReadTxn()
	var revs []statedb.Revision
	for _, tbl := range tables {
		revs = append(revs, tbl.Revision(txn))
	}
	return append(revs, summary.Revision(txn))
}

// liveHeap is memtest.LiveHeap.
var liveHeap = memtest.LiveHeap

func mb(b uint64) float64 { return float64(b) / (1 << 20) }
