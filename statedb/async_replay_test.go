package statedb

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"go.uber.org/goleak"

	"github.com/steadystate/steadystate/index"
)

// gate holds replays still: a key function calls wait, which counts the
// call in c and, once armed, on the call-th waits until release is
// closed, after telling entered who waits.
type gate struct {
	armed   atomic.Bool
	call    int64
	entered chan string
	release chan struct{}
	once    sync.Once
}

func newGate(call int64) *gate {
	return &gate{call: call, entered: make(chan string, 16), release: make(chan struct{})}
}

// open lets every replay that waits go on (a test that failed midway
// calls it in a cleanup, so that the bubble's goroutines end).
func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

func (g *gate) wait(name string, c *atomic.Int64) {
	if c.Add(1) == g.call && g.armed.Load() {
		g.entered <- name
		<-g.release
	}
}

// gatedIndex returns a non-unique index of the keys keysOf returns whose
// key computations g counts in calls and may hold.
func gatedIndex(g *gate, name string, calls *atomic.Int64, keysOf func(*asyncObj) []string) Index[*asyncObj, string] {
	return Index[*asyncObj, string]{
		Name: name,
		FromObject: func(o *asyncObj) index.KeySet {
			g.wait(name, calls)
			return strKeys(keysOf(o)...)
		},
		FromKey: index.String,
	}
}

func kindOf(o *asyncObj) []string { return []string{o.Kind} }
func tagsOf(o *asyncObj) []string { return o.Tags }

// A replay beside the writer runs on GOMAXPROCS-1 goroutines (the writer
// keeps a core), each taking the next index: with two or more, two
// indexes that wait for each other both start. (On one goroutine, the
// second waits for the first.)
func TestAsyncReplayIndexesAtOnce(t *testing.T) {
	for _, procs := range []int{2, 3, 6} {
		t.Run(fmt.Sprintf("GOMAXPROCS=%d", procs), func(t *testing.T) {
			setReplay(t, parallelReplayAbove.Load(), 8, procs)
			synctest.Test(t, func(t *testing.T) {
				g := newGate(1)
				g.armed.Store(true)
				t.Cleanup(g.open)
				var kindCalls, tagCalls atomic.Int64
				db := New()
				tbl, err := NewTable(db, "atonce", asyncID, gatedIndex(g, "kind", &kindCalls, kindOf), gatedIndex(g, "tags", &tagCalls, tagsOf), asyncNets)
				if err != nil {
					t.Fatal(err)
				}
				m := newAsyncModel()
				wtxn := db.WriteTxn(tbl)
				for i := range 8 { // the 8th starts the replay
					o := &asyncObj{ID: uint64(i), Kind: "a", Tags: []string{"red"}, Prefixes: []netip.Prefix{pfx("10.0.0.0/8")}}
					if _, _, err := tbl.Insert(wtxn, o); err != nil {
						t.Fatal(err)
					}
					m.put(o)
				}
				synctest.Wait()
				if n, want := len(g.entered), min(2, procs-1); n != want {
					t.Errorf("%d indexes replayed at once, want %d", n, want)
				}
				g.open()
				checkAsync(t, wtxn, tbl, []string{"kind", "tags", "nets"}, m, "in the WriteTxn")
				checkAsync(t, wtxn.Commit(), tbl, []string{"kind", "tags", "nets"}, m, "committed")
			})
			goleak.VerifyNone(t)
		})
	}
}

// A read of one deferred index in the middle of the transaction waits
// until the replays of every index have ended, not only its own: until
// then their goroutines still write their trees.
func TestAsyncReplayReadWaits(t *testing.T) {
	for _, procs := range []int{2, 5} {
		t.Run(fmt.Sprintf("GOMAXPROCS=%d", procs), func(t *testing.T) {
			setReplay(t, parallelReplayAbove.Load(), 8, procs)
			synctest.Test(t, func(t *testing.T) {
				g := newGate(3)
				g.armed.Store(true)
				t.Cleanup(g.open)
				var kindCalls atomic.Int64
				db := New()
				tbl, err := NewTable(db, "readwaits", asyncID, gatedIndex(g, "kind", &kindCalls, kindOf), asyncTags, asyncNets)
				if err != nil {
					t.Fatal(err)
				}
				m := newAsyncModel()
				wtxn := db.WriteTxn(tbl)
				for i := range 8 {
					o := &asyncObj{ID: uint64(i), Kind: "a", Tags: asyncTagPool[:i%3], Prefixes: asyncNetPool[i%4 : i%4+1]}
					if _, _, err := tbl.Insert(wtxn, o); err != nil {
						t.Fatal(err)
					}
					m.put(o)
				}
				synctest.Wait() // the kind index's replay waits
				if len(g.entered) != 1 {
					t.Fatal("the kind index's replay does not wait")
				}
				read := make(chan []asyncEntry, 1)
				go func() { read <- asyncCollect(tbl.List(wtxn, asyncTags.Query("red"))) }()
				synctest.Wait()
				select {
				case <-read:
					t.Fatal("a read of the tags index returned while the kind index's replay still ran")
				default:
				}
				g.open()
				got := <-read
				want := slices.DeleteFunc(m.sorted(asyncByID), func(e asyncEntry) bool { return !slices.Contains(e.obj.Tags, "red") })
				if !sameAsync(got, want) {
					t.Errorf("List(tags=red) = %s", asyncDiff(got, want))
				}
				checkAsync(t, wtxn.Commit(), tbl, []string{"kind", "tags", "nets"}, m, "committed")
			})
			goleak.VerifyNone(t)
		})
	}
}

// panicIndex is a non-unique index by kind whose FromObject panics with
// msg for an object of kind "boom" (after waiting for release, if not
// nil); panicked is set just before.
type panicIndex struct {
	Index[*asyncObj, string]
	panicked atomic.Bool
	entered  chan string
	release  chan struct{}
	once     sync.Once
}

func (p *panicIndex) open() {
	if p.release != nil {
		p.once.Do(func() { close(p.release) })
	}
}

func newPanicIndex(name, msg string, wait bool) *panicIndex {
	p := &panicIndex{entered: make(chan string, 16)}
	if wait {
		p.release = make(chan struct{})
	}
	p.Index = Index[*asyncObj, string]{
		Name: name,
		FromObject: func(o *asyncObj) index.KeySet {
			if o.Kind == "boom" {
				if p.release != nil {
					p.entered <- name
					<-p.release
				}
				p.panicked.Store(true)
				panic(msg)
			}
			return strKeys(o.Kind)
		},
		FromKey: index.String,
	}
	return p
}

// A panic in one index's replay beside the writer comes out of the next
// read of that index, or of the Commit, on the writer's goroutine, and
// only once the other replays have ended: while one of them still runs,
// the read or Commit waits. Writes go on meanwhile without raising it.
// Abort then leaves the committed state as it was, and the table is
// writable again. (GOMAXPROCS 5: a goroutine per index; 2: one
// goroutine, which the panic ends.)
func TestAsyncReplayPanic(t *testing.T) {
	const at = 32
	read := func(wtxn WriteTxn, tbl Table[*asyncObj], boom Index[*asyncObj, string]) {
		for range tbl.List(wtxn, boom.Query("a")) {
		}
	}
	commit := func(wtxn WriteTxn, _ Table[*asyncObj], _ Index[*asyncObj, string]) { wtxn.Commit() }
	for _, c := range []struct {
		name  string
		procs int
		// writesAfter: writes after the panic, before the end; with
		// released, once every replay ended.
		writesAfter, released bool
		end                   func(wtxn WriteTxn, tbl Table[*asyncObj], boom Index[*asyncObj, string])
	}{
		{"read", 5, false, false, read},
		{"commit", 5, true, false, commit},
		{"commit-after-the-replays", 5, true, true, commit},
		{"read-one-goroutine", 2, false, true, read},
		{"commit-one-goroutine", 2, true, true, commit},
	} {
		t.Run(c.name, func(t *testing.T) {
			setReplay(t, parallelReplayAbove.Load(), at, c.procs)
			synctest.Test(t, func(t *testing.T) {
				boom := newPanicIndex("boom", "boom index", false)
				g := newGate(3)
				t.Cleanup(g.open)
				var tagCalls atomic.Int64
				db := New()
				tbl, err := NewTable(db, "panicky", asyncID, boom.Index, gatedIndex(g, "tags", &tagCalls, tagsOf), asyncNets)
				if err != nil {
					t.Fatal(err)
				}
				// A committed state to keep.
				m := newAsyncModel()
				wtxn := db.WriteTxn(tbl)
				for i := range 5 {
					o := &asyncObj{ID: uint64(i), Kind: "a", Tags: []string{"red"}, Prefixes: []netip.Prefix{pfx("10.0.0.0/8")}}
					tbl.Insert(wtxn, o)
					m.put(o)
				}
				wtxn.Commit()
				tagCalls.Store(0)
				gated := c.procs > 2 // the tags index replays beside the boom index
				g.armed.Store(gated)

				wtxn = db.WriteTxn(tbl)
				defer wtxn.Abort()
				for i := range at { // the last starts the replay
					kind := "a"
					if i == 10 {
						kind = "boom"
					}
					if _, _, err := tbl.Insert(wtxn, &asyncObj{ID: uint64(100 + i), Kind: kind, Tags: []string{"blue"}}); err != nil {
						t.Fatal(err)
					}
				}
				synctest.Wait() // the boom index's replay panicked; the tags' one waits
				if !boom.panicked.Load() || gated && len(g.entered) != 1 {
					t.Fatalf("boom index panicked: %v, tags index waits: %v", boom.panicked.Load(), len(g.entered) == 1)
				}
				if gated && c.released {
					g.open()
					synctest.Wait() // every replay ended
				}
				if c.writesAfter {
					// More than asyncReplayAt: a write would start the
					// next replay, had the last ended well.
					for i := range 2 * at {
						if _, _, err := tbl.Insert(wtxn, &asyncObj{ID: uint64(1000 + i), Kind: "b"}); err != nil {
							t.Fatal(err)
						}
					}
				}
				raised := make(chan any, 1)
				go func() {
					defer func() { raised <- recover() }()
					c.end(wtxn, tbl, boom.Index)
				}()
				if gated && !c.released {
					synctest.Wait()
					select {
					case p := <-raised:
						t.Fatalf("the %s returned (panic %v) while the tags index's replay still ran", c.name, p)
					default:
					}
					g.open()
				}
				if p := <-raised; p != "boom index" {
					t.Errorf("the %s panicked with %v, want the boom index's panic", c.name, p)
				}
				// The tags index's goroutine replayed every write it was
				// given before the panic came out.
				if n := tagCalls.Load(); gated && n != at {
					t.Errorf("the tags index computed %d keys before the panic came out, want %d", n, at)
				}
				func() {
					defer func() {
						if p := recover(); p != nil {
							t.Errorf("Abort panicked: %v", p)
						}
					}()
					wtxn.Abort()
				}()
				checkAsyncPanicky(t, db.ReadTxn(), tbl, m, "after the Abort")

				// Writable again, and no panic left behind.
				g.armed.Store(false)
				wtxn = db.WriteTxn(tbl)
				for i := range 3 * at {
					o := &asyncObj{ID: uint64(200 + i), Kind: "c", Tags: []string{"gold"}}
					tbl.Insert(wtxn, o)
					m.put(o)
				}
				checkAsyncPanicky(t, wtxn.Commit(), tbl, m, "the next transaction")
			})
			goleak.VerifyNone(t)
		})
	}
}

// checkAsyncPanicky checks a table of TestAsyncReplayPanic: its content,
// its nets index and its tags index.
func checkAsyncPanicky(t *testing.T, txn ReadTxn, tbl Table[*asyncObj], m asyncModel, where string) {
	t.Helper()
	checkAsync(t, txn, tbl, []string{"tags", "nets"}, m, where)
}

// An Abort while the replays run beside the writer stops each index's at
// the end of the chunk it is in, waits for every goroutine, and leaves
// the committed state as it was; the next transaction, on the same pooled
// state, replays beside the writer again and commits every write.
func TestAsyncReplayAbort(t *testing.T) {
	const (
		kept  = 50              // committed objects, written again in the aborted txn
		total = 2000            // writes of the aborted txn; the last starts the replay
		chunk = kept + logChunk // keys an index computes for the first chunk
	)
	for _, procs := range []int{2, 6} {
		t.Run(fmt.Sprintf("GOMAXPROCS=%d", procs), func(t *testing.T) {
			setReplay(t, parallelReplayAbove.Load(), total, procs)
			synctest.Test(t, func(t *testing.T) {
				g := newGate(5)
				t.Cleanup(g.open)
				calls := map[string]*atomic.Int64{"kind": {}, "tags": {}, "nets": {}, "first": {}}
				nets := LPMIndex[*asyncObj]{Name: "nets", FromObject: func(o *asyncObj) []netip.Prefix {
					g.wait("nets", calls["nets"])
					return o.Prefixes
				}}
				first := LPMIndex[*asyncObj]{Name: "first", Prefix: func(o *asyncObj) netip.Prefix {
					g.wait("first", calls["first"])
					return firstNet(o)
				}}
				db := New()
				tbl, err := NewTable(db, "aborted", asyncID,
					gatedIndex(g, "kind", calls["kind"], kindOf), gatedIndex(g, "tags", calls["tags"], tagsOf), nets, first)
				if err != nil {
					t.Fatal(err)
				}
				m := newAsyncModel()
				wtxn := db.WriteTxn(tbl)
				for i := range kept {
					o := &asyncObj{ID: uint64(i), Kind: "a", Tags: []string{"red"}, Prefixes: []netip.Prefix{pfx("10.0.0.0/8"), pfx("10.1.0.0/16")}}
					tbl.Insert(wtxn, o)
					m.put(o)
				}
				wtxn.Commit()
				for _, c := range calls {
					c.Store(0)
				}
				g.armed.Store(true)

				wtxn = db.WriteTxn(tbl)
				for i := range total {
					o := &asyncObj{ID: uint64(i), Kind: "b", Tags: []string{"green"}, Prefixes: []netip.Prefix{pfx("192.168.0.0/16")}}
					if _, _, err := tbl.Insert(wtxn, o); err != nil {
						t.Fatal(err)
					}
				}
				synctest.Wait() // the replays wait in their first chunk
				if n, want := len(g.entered), min(len(calls), procs-1); n != want {
					t.Fatalf("%d indexes' replays wait, want %d", n, want)
				}
				aborted := make(chan struct{})
				go func() {
					wtxn.Abort()
					close(aborted)
				}()
				synctest.Wait()
				select {
				case <-aborted:
					t.Fatal("Abort returned while the replays ran")
				default:
				}
				g.open()
				<-aborted
				after := map[string]int64{}
				for name, c := range calls {
					after[name] = c.Load()
					if after[name] > chunk {
						t.Errorf("index %s computed %d keys in the aborted transaction, want at most %d (its first chunk)", name, after[name], chunk)
					}
				}
				// Every replay ended with the Abort: no key is computed
				// after it.
				synctest.Wait()
				for name, c := range calls {
					if n := c.Load(); n != after[name] {
						t.Errorf("index %s computed %d keys after the Abort returned", name, n-after[name])
					}
				}
				checkAsync(t, db.ReadTxn(), tbl, []string{"kind", "tags", "nets", "first"}, m, "after the Abort")

				wtxn = db.WriteTxn(tbl)
				for i := range 2 * total {
					o := &asyncObj{ID: uint64(i % 3000), Kind: "c", Tags: []string{"blue"}, Prefixes: []netip.Prefix{pfx("10.1.2.0/24")}}
					tbl.Insert(wtxn, o)
					m.put(o)
					if i == total && asyncOf(wtxn, tbl) == nil {
						t.Error("the next transaction replays no more beside the writer")
					}
				}
				checkAsync(t, wtxn.Commit(), tbl, []string{"kind", "tags", "nets", "first"}, m, "the next transaction")
			})
			goleak.VerifyNone(t)
		})
	}
}

// Two indexes whose replays panic at the same moment (on two goroutines;
// on one, only the first index's replay gets to panic): the Commit raises
// one of the panics, once; Abort raises none and ends the transaction,
// and nothing deadlocks (synctest would report it).
func TestAsyncReplayTwoPanics(t *testing.T) {
	const at = 8
	for _, procs := range []int{2, 4} {
		t.Run(fmt.Sprintf("GOMAXPROCS=%d", procs), func(t *testing.T) {
			setReplay(t, parallelReplayAbove.Load(), at, procs)
			raised := map[any]int{}
			for range 20 {
				synctest.Test(t, func(t *testing.T) {
					a := newPanicIndex("boom-a", "boom a", true)
					b := newPanicIndex("boom-b", "boom b", true)
					t.Cleanup(a.open)
					t.Cleanup(b.open)
					db := New()
					tbl, err := NewTable(db, "panicky", asyncID, a.Index, b.Index, asyncNets)
					if err != nil {
						t.Fatal(err)
					}
					wtxn := db.WriteTxn(tbl)
					for i := range at {
						kind := "a"
						if i == 3 {
							kind = "boom"
						}
						tbl.Insert(wtxn, &asyncObj{ID: uint64(i), Kind: kind, Prefixes: []netip.Prefix{pfx("10.0.0.0/8")}})
					}
					synctest.Wait()
					if n, want := len(a.entered)+len(b.entered), min(2, procs-1); n != want {
						t.Fatalf("%d indexes reached the object that panics at once, want %d", n, want)
					}
					a.open()
					b.open()
					func() {
						defer func() {
							p := recover()
							raised[p]++
							if p != "boom a" && p != "boom b" {
								t.Errorf("Commit panicked with %v, want one of the indexes' panics", p)
							}
							if p == "boom a" && !a.panicked.Load() || p == "boom b" && !b.panicked.Load() {
								t.Errorf("Commit panicked with %v, which no index raised", p)
							}
						}()
						wtxn.Commit()
					}()
					if procs > 2 && (!a.panicked.Load() || !b.panicked.Load()) {
						t.Errorf("panicked: a %v, b %v; want both", a.panicked.Load(), b.panicked.Load())
					}
					func() {
						defer func() {
							if p := recover(); p != nil {
								t.Errorf("Abort after the Commit's panic panicked with %v", p)
							}
						}()
						wtxn.Abort()
					}()
					wtxn = db.WriteTxn(tbl)
					if n := tbl.NumObjects(wtxn); n != 0 {
						t.Errorf("%d objects after the failed commit, want 0", n)
					}
					tbl.Insert(wtxn, &asyncObj{ID: 1, Kind: "a"})
					wtxn.Commit()
					if got := asyncCollect(tbl.List(db.ReadTxn(), a.Query("a"))); len(got) != 1 || got[0].obj.ID != 1 {
						t.Errorf("after the next commit, List(boom-a=a) = [%s], want object 1", asyncString(got))
					}
				})
			}
			goleak.VerifyNone(t)
			t.Logf("panics raised: %v", raised)
		})
	}
}
