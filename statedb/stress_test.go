package statedb

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Concurrent stress test. Writers keep an invariant across tables: the
// counter object k in table "counters" equals the number of objects in table
// k ("bravo" is 1, "charlie" is 2); they change a table and its counter in one
// transaction, and open WriteTxns on one to three tables in random argument
// order (a lock-order bug deadlocks). Readers check the invariant in every
// snapshot; watchers must be woken after a relevant commit; a change iterator
// consumer checks its view against the table.
//
// Duration: STATEDB_STRESS_SECONDS (default 2).

func TestStress(t *testing.T) {
	seed := testSeed(t)
	duration := time.Duration(envInt(t, "STATEDB_STRESS_SECONDS", 2)) * time.Second

	db := New()
	counters, err := NewTable(db, "counters", idIndex)
	if err != nil {
		t.Fatal(err)
	}
	bravo, err := NewTable(db, "bravo", idIndex, tagIndex)
	if err != nil {
		t.Fatal(err)
	}
	charlie, err := NewTable(db, "charlie", idIndex)
	if err != nil {
		t.Fatal(err)
	}
	counted := map[uint64]RWTable[*testObject]{1: bravo, 2: charlie}
	{
		wtxn := db.WriteTxn(counters)
		counters.Insert(wtxn, &testObject{ID: 1, Name: "0"})
		counters.Insert(wtxn, &testObject{ID: 2, Name: "0"})
		wtxn.Commit()
	}
	const ids = 64

	var (
		stop    = make(chan struct{})
		failed  atomic.Bool
		wg      sync.WaitGroup
		commits atomic.Int64
		reads   atomic.Int64
		wakeups atomic.Int64
	)
	fail := func(format string, args ...any) {
		t.Errorf(format, args...)
		if failed.CompareAndSwap(false, true) {
			close(stop)
		}
	}
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	counterOf := func(txn ReadTxn, k uint64) (int, *testObject, Revision) {
		o, rev, found := counters.Get(txn, idIndex.Query(k))
		if !found {
			fail("counter %d missing", k)
			return -1, nil, 0
		}
		n, _ := strconv.Atoi(o.Name)
		return n, o, rev
	}
	shuffled := func(rng *rand.Rand, ts ...TableMeta) []TableMeta {
		rng.Shuffle(len(ts), func(i, j int) { ts[i], ts[j] = ts[j], ts[i] })
		return ts
	}
	tag := func(rng *rand.Rand) []string { return [][]string{nil, {"x"}, {"y"}, {"x", "y"}}[rng.IntN(4)] }

	// Writers.
	for w := range 3 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for !stopped() {
				k := uint64(1 + rng.IntN(2))
				tbl := counted[k]
				var wtxn WriteTxn
				switch kind := rng.IntN(10); {
				case kind < 5:
					// Insert or delete in a counted table and update its
					// counter, atomically.
					ts := shuffled(rng, counters, tbl)
					wtxn = db.WriteTxn(ts[0], ts[1:]...)
					n, c, rev := counterOf(wtxn, k)
					id := uint64(rng.IntN(ids))
					if rng.IntN(2) == 0 {
						if _, had, err := tbl.Insert(wtxn, &testObject{ID: id, Tags: tag(rng)}); err != nil {
							fail("insert: %v", err)
						} else if !had {
							n++
						}
					} else if _, had, _ := tbl.Delete(wtxn, &testObject{ID: id}); had {
						n--
					}
					nc := c.clone()
					nc.Name = strconv.Itoa(n)
					if _, _, err := counters.CompareAndSwap(wtxn, rev, nc); err != nil {
						fail("counter CompareAndSwap inside the txn that read it: %v", err)
					}
				case kind < 7:
					// Replace objects of both counted tables; counts stay.
					ts := shuffled(rng, bravo, charlie)
					wtxn = db.WriteTxn(ts[0], ts[1:]...)
					for _, tb := range []RWTable[*testObject]{bravo, charlie} {
						if o, _, found := tb.Get(wtxn, idIndex.Query(uint64(rng.IntN(ids)))); found {
							c := o.clone()
							c.Tags = tag(rng)
							tb.Insert(wtxn, c)
						}
					}
				case kind < 8:
					// One table alone: replace an object.
					wtxn = db.WriteTxn(tbl)
					if o, _, found := tbl.Get(wtxn, idIndex.Query(uint64(rng.IntN(ids)))); found {
						tbl.Insert(wtxn, o.clone())
					}
				case kind < 9:
					// The counters alone: rewrite a counter unchanged.
					wtxn = db.WriteTxn(counters)
					_, c, _ := counterOf(wtxn, k)
					counters.Insert(wtxn, c.clone())
				default:
					// All three, in random order; sometimes aborted below.
					ts := shuffled(rng, counters, bravo, charlie)
					wtxn = db.WriteTxn(ts[0], ts[1:]...)
					for k, tb := range counted {
						n, c, _ := counterOf(wtxn, k)
						if _, had, _ := tb.Delete(wtxn, &testObject{ID: uint64(rng.IntN(ids))}); had {
							nc := c.clone()
							nc.Name = strconv.Itoa(n - 1)
							counters.Insert(wtxn, nc)
						}
					}
				}
				if rng.IntN(10) == 0 {
					wtxn.Abort()
				} else {
					wtxn.Commit()
					commits.Add(1)
				}
			}
		})
	}

	// Readers: the invariant holds in every snapshot, revisions never go
	// back.
	for range 2 {
		wg.Go(func() {
			var lastRev [3]Revision
			for !stopped() {
				txn := db.ReadTxn()
				for k, tb := range counted {
					n, _, _ := counterOf(txn, k)
					if m := tb.NumObjects(txn); n != m {
						fail("snapshot: counter %d = %d, but table %s has %d objects", k, n, tb.Name(), m)
					}
					all := 0
					for range tb.All(txn) {
						all++
					}
					if all != n {
						fail("snapshot: counter %d = %d, but All(%s) yields %d objects", k, n, tb.Name(), all)
					}
				}
				for i, tb := range []RWTable[*testObject]{counters, bravo, charlie} {
					rev := tb.Revision(txn)
					if rev < lastRev[i] {
						fail("table %s revision went back from %d to %d", tb.Name(), lastRev[i], rev)
					}
					lastRev[i] = rev
				}
				reads.Add(1)
				runtime.Gosched()
			}
		})
	}

	// Watchers: a watch channel closes after a relevant commit, and a
	// woken reader sees the change.
	for w := range 3 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, 100+uint64(w)))
			for !stopped() {
				txn := db.ReadTxn()
				var watch <-chan struct{}
				var changed func(ReadTxn) bool
				var what string
				switch rng.IntN(3) {
				case 0:
					_, watch = bravo.AllWatch(txn)
					rev := bravo.Revision(txn)
					changed = func(txn ReadTxn) bool { return bravo.Revision(txn) != rev }
					what = "AllWatch(bravo)"
				case 1:
					id := uint64(rng.IntN(ids))
					_, rev, ch, found := charlie.GetWatch(txn, idIndex.Query(id))
					watch = ch
					changed = func(txn ReadTxn) bool {
						_, rev2, found2 := charlie.Get(txn, idIndex.Query(id))
						return found2 != found || rev2 != rev
					}
					what = fmt.Sprintf("GetWatch(charlie, %d)", id)
				default:
					seq, ch := bravo.ListWatch(txn, tagIndex.Query("x"))
					before := collect(seq)
					watch = ch
					changed = func(txn ReadTxn) bool { return !equalEntries(collect(bravo.List(txn, tagIndex.Query("x"))), before) }
					what = "ListWatch(bravo, x)"
				}
				var changedSince time.Time
				tick := time.NewTicker(20 * time.Millisecond)
			wait:
				for {
					select {
					case <-watch:
						if what[0] == 'A' && !changed(db.ReadTxn()) {
							fail("%s closed, but the woken reader does not see a change", what)
						}
						wakeups.Add(1)
						break wait
					case <-stop:
						break wait
					case <-tick.C:
						if !changed(db.ReadTxn()) {
							continue
						}
						if changedSince.IsZero() {
							changedSince = time.Now()
						} else if time.Since(changedSince) > 3*time.Second {
							fail("%s not closed 3s after a relevant commit", what)
							break wait
						}
					}
				}
				tick.Stop()
			}
		})
	}

	// Change iterator consumers on bravo: each checks its view against the
	// table, and now and then closes its iterator and registers a new one,
	// concurrently with the writers and the other consumer.
	for c := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, 200+uint64(c)))
			for !stopped() {
				wtxn := db.WriteTxn(bravo)
				it, err := bravo.Changes(wtxn)
				wtxn.Commit()
				if err != nil {
					fail("Changes: %v", err)
					return
				}
				view := map[uint64]modelEntry{}
				var last Revision
				for n := rng.IntN(300); n > 0 && !stopped(); n-- {
					txn := db.ReadTxn()
					seq, watch := it.Next(txn)
					for c, rev := range seq {
						if rev <= last {
							fail("change iterator: revision %d after %d", rev, last)
						}
						last = rev
						if c.Deleted {
							delete(view, c.Object.ID)
						} else {
							view[c.Object.ID] = modelEntry{obj: c.Object, rev: rev}
						}
					}
					if got, want := (tableModel{objs: view}).sorted(byID), collect(bravo.All(txn)); !equalEntries(got, want) {
						fail("change iterator view = [%s], table = [%s]", entriesString(got), entriesString(want))
					}
					select {
					case <-watch:
					case <-stop:
					case <-time.After(5 * time.Second):
						fail("change iterator's watch channel not closed in 5s while writers are writing")
					}
				}
				it.Close()
			}
		})
	}

	select {
	case <-stop:
	case <-time.After(duration):
		close(stop)
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(20 * time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines did not stop in 20s (deadlock?):\n%s", buf[:runtime.Stack(buf, true)])
	}
	// Every iterator is closed: the next commit on the table frees all.
	wtxn := db.WriteTxn(bravo)
	wtxn.Commit()
	if n := graveyardLen(db, bravo); n != 0 {
		t.Errorf("graveyard of bravo holds %d objects after every iterator was closed", n)
	}
	t.Logf("%d commits, %d consistent snapshots, %d watch wake-ups in %v", commits.Load(), reads.Load(), wakeups.Load(), duration)
	if commits.Load() == 0 || reads.Load() == 0 || wakeups.Load() == 0 {
		t.Errorf("the stress test did not do anything")
	}
}
