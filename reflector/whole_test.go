package reflector_test

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadystate/steadystate/reflector"
)

// One revision is committed whole, in one transaction over every table,
// and Revision claims it only then, whatever the batch size, the batch
// interval and the number of the revision's events: at the batch size
// and at the timer's edge. Each step runs in a synctest bubble until every
// goroutine is blocked, so "nothing happened" is exact.
func TestWholeRevisions(t *testing.T) {
	type step struct {
		send  []reflector.Event[int] // sent to the watch in order
		sleep time.Duration          // fake time passing after the sends
		want  uint64                 // Revision after the step
		table map[tk]int             // the tables after the step
	}
	put := func(table, key string, v int, rev uint64) reflector.Event[int] {
		return reflector.Event[int]{Kind: reflector.Put, Table: table, Key: key, Value: v, Revision: rev}
	}
	del := func(table, key string, rev uint64) reflector.Event[int] {
		return reflector.Event[int]{Kind: reflector.Delete, Table: table, Key: key, Revision: rev}
	}
	progress := func(rev uint64) reflector.Event[int] {
		return reflector.Event[int]{Kind: reflector.Progress, Revision: rev}
	}
	listed := map[tk]int{{"ta", "x"}: 1} // at revision 10
	with := func(kv ...any) map[tk]int {
		m := maps.Clone(listed)
		for i := 0; i < len(kv); i += 3 {
			k := tk{kv[i].(string), kv[i+1].(string)}
			if v := kv[i+2].(int); v < 0 {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		return m
	}
	rev11 := []reflector.Event[int]{put("ta", "a", 1, 11), put("tb", "b", 2, 11), put("ta", "c", 3, 11), put("tb", "d", 4, 11), del("ta", "x", 11)}
	after11 := with("ta", "a", 1, "tb", "b", 2, "ta", "c", 3, "tb", "d", 4, "ta", "x", -1)
	cases := []struct {
		name    string
		steps   []step
		commits int // after the list's
	}{
		{"a revision larger than the batch: whole after the quiet interval", []step{
			{send: rev11[:3], want: 10, table: listed},
			{send: rev11[3:], sleep: 999 * time.Millisecond, want: 10, table: listed},
			{sleep: time.Millisecond, want: 11, table: after11},
		}, 1},
		{"a revision larger than the batch: whole at the next revision, committed by size", []step{
			{send: rev11, want: 10, table: listed},
			{send: []reflector.Event[int]{put("tb", "e", 5, 12)}, want: 11, table: after11},
			{sleep: time.Second, want: 12, table: with("ta", "a", 1, "tb", "b", 2, "ta", "c", 3, "tb", "d", 4, "ta", "x", -1, "tb", "e", 5)},
		}, 2},
		{"the timer's edge: the whole revision by time, the open one by quiet", []step{
			{send: rev11[:1], sleep: 500 * time.Millisecond, want: 10, table: listed},
			{send: []reflector.Event[int]{put("tb", "e", 5, 12)}, sleep: 499 * time.Millisecond, want: 10, table: listed},
			{sleep: time.Millisecond, want: 11, table: with("ta", "a", 1)}, // 11's event waited 1s
			{sleep: 499 * time.Millisecond, want: 11, table: with("ta", "a", 1)},
			{sleep: time.Millisecond, want: 12, table: with("ta", "a", 1, "tb", "e", 5)}, // 12 quiet for 1s
		}, 2},
		{"events that keep coming within the interval: a revision waits to be whole", []step{
			{send: rev11[:1], sleep: 900 * time.Millisecond, want: 10, table: listed},
			{send: rev11[1:2], sleep: 900 * time.Millisecond, want: 10, table: listed},
			{send: rev11[2:], sleep: 999 * time.Millisecond, want: 10, table: listed},
			{sleep: time.Millisecond, want: 11, table: after11},
		}, 1},
		{"a progress ends an open revision at once", []step{
			{send: rev11, want: 10, table: listed},
			{send: []reflector.Event[int]{progress(11)}, want: 11, table: after11},
		}, 1},
		{"a progress past it: both at once", []step{
			{send: rev11, want: 10, table: listed},
			{send: []reflector.Event[int]{progress(20)}, want: 20, table: after11},
			{send: []reflector.Event[int]{put("ta", "a", 9, 19)}, sleep: time.Hour, want: 20, table: after11}, // stale: 19 was whole
		}, 1},
		{"a key changed in several revisions of one batch: the latest wins", []step{
			// 13 makes 11 and 12 whole: a batch of 2.
			{send: []reflector.Event[int]{put("ta", "a", 1, 11), put("ta", "a", 2, 12), del("ta", "a", 13), put("ta", "a", 4, 14)}, want: 12, table: with("ta", "a", 2)},
			{send: []reflector.Event[int]{progress(14)}, want: 14, table: with("ta", "a", 4)},
		}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := &chanSource{items: []reflector.Item[int]{{Table: "ta", Key: "x", Value: 1}}, rev: 10, events: make(chan reflector.Event[int])}
				metrics := &countMetrics{}
				f := newMultiFixture(t, src, 2, time.Second, metrics)
				f.run(t)
				synctest.Wait()
				if got := f.snapshot(f.db.ReadTxn()); f.multi.Revision() != 10 || !maps.Equal(got, listed) {
					t.Fatalf("after the list: Revision %d, tables %v", f.multi.Revision(), got)
				}
				for i, st := range tc.steps {
					for _, ev := range st.send {
						src.events <- ev
					}
					time.Sleep(st.sleep)
					synctest.Wait()
					if got := f.snapshot(f.db.ReadTxn()); f.multi.Revision() != st.want || !maps.Equal(got, st.table) {
						t.Fatalf("step %d: Revision %d, tables %v\nwant %d, %v", i, f.multi.Revision(), got, st.want, st.table)
					}
				}
				if _, batches := metrics.counts(); batches != 1+tc.commits {
					t.Fatalf("%d commits, want %d", batches, 1+tc.commits)
				}
			})
		})
	}
}

// RevisionWatch's channel closes when Revision moves, and only then.
func TestRevisionWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &chanSource{rev: 10, events: make(chan reflector.Event[int])}
		f := newMultiFixture(t, src, 2, time.Second, nil)
		rev, moved := f.multi.RevisionWatch()
		if rev != 0 {
			t.Fatalf("Revision %d before the list", rev)
		}
		f.run(t)
		synctest.Wait()
		select {
		case <-moved:
		default:
			t.Fatal("the list did not close the channel")
		}
		rev, moved = f.multi.RevisionWatch()
		src.events <- reflector.Event[int]{Kind: reflector.Put, Table: "ta", Key: "a", Value: 1, Revision: 11}
		synctest.Wait()
		select {
		case <-moved:
			t.Fatal("closed before the revision moved")
		default:
		}
		src.events <- reflector.Event[int]{Kind: reflector.Progress, Revision: 11}
		synctest.Wait()
		select {
		case <-moved:
		default:
			t.Fatal("not closed after the revision moved")
		}
		if got, _ := f.multi.RevisionWatch(); rev != 10 || got != 11 {
			t.Fatalf("revisions %d then %d, want 10 then 11", rev, got)
		}
	})
}

// tableOf formats an event for a failure message.
func (k tk) String() string { return fmt.Sprintf("%s/%s", k.table, k.key) }

// slowFirstCommit makes the first commit after the list take 50ms, as a
// loaded machine or a large batch may.
type slowFirstCommit struct {
	reflector.NopMetrics
	commits int
}

func (s *slowFirstCommit) BatchCommitted(string, int, time.Duration) {
	if s.commits++; s.commits == 2 {
		time.Sleep(50 * time.Millisecond)
	}
}

// A commit that takes longer than BatchInterval while a revision is open
// does not make that revision look quiet: the events that come after the
// commit are still taken as part of it. (The timer, set while the commit
// held the reflector, and the next event are ready together.)
func TestSlowCommitDoesNotEndARevision(t *testing.T) {
	for i := range 40 {
		synctest.Test(t, func(t *testing.T) {
			src := &chanSource{rev: 10, events: make(chan reflector.Event[int])}
			f := newMultiFixture(t, src, 2, 10*time.Millisecond, &slowFirstCommit{})
			f.run(t)
			synctest.Wait()
			put := func(key string, rev uint64) reflector.Event[int] {
				return reflector.Event[int]{Kind: reflector.Put, Table: "ta", Key: key, Value: 1, Revision: rev}
			}
			for _, ev := range []reflector.Event[int]{put("a", 11), put("b", 11), put("c", 12), put("d", 12), put("e", 12), put("f", 12),
				{Kind: reflector.Progress, Revision: 12}} {
				src.events <- ev
			}
			synctest.Wait()
			want := map[tk]int{{"ta", "a"}: 1, {"ta", "b"}: 1, {"ta", "c"}: 1, {"ta", "d"}: 1, {"ta", "e"}: 1, {"ta", "f"}: 1}
			if got := f.snapshot(f.db.ReadTxn()); f.multi.Revision() != 12 || !maps.Equal(got, want) {
				t.Fatalf("run %d: Revision %d, tables %v; want 12 with a to f", i, f.multi.Revision(), got)
			}
		})
	}
}

// A source that pauses within a revision for longer than BatchInterval
// breaks its contract: the part before the pause is taken as whole, and
// the next event of that revision makes the reflector list again, so that
// nothing is lost.
func TestPauseWithinARevisionRelists(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &listingSource{chanSource: chanSource{rev: 10, events: make(chan reflector.Event[int])}}
		metrics := &countMetrics{}
		f := newMultiFixture(t, src, 100, 10*time.Millisecond, metrics)
		f.run(t)
		synctest.Wait()
		src.events <- reflector.Event[int]{Kind: reflector.Put, Table: "ta", Key: "a", Value: 1, Revision: 11}
		time.Sleep(time.Second) // the pause: 11 looks whole and is committed
		synctest.Wait()
		src.items = []reflector.Item[int]{{Table: "ta", Key: "a", Value: 1}, {Table: "ta", Key: "b", Value: 2}}
		src.rev = 11
		src.events <- reflector.Event[int]{Kind: reflector.Put, Table: "ta", Key: "b", Value: 2, Revision: 11}
		synctest.Wait()
		if got := f.snapshot(f.db.ReadTxn()); f.multi.Revision() != 11 || !maps.Equal(got, map[tk]int{{"ta", "a"}: 1, {"ta", "b"}: 2}) || src.lists != 2 {
			t.Fatalf("Revision %d, tables %v after %d lists; want a and b at 11 after a second list", f.multi.Revision(), got, src.lists)
		}
	})
}

// listingSource is a chanSource that counts its lists; its watch ends
// when the reflector cancels it.
type listingSource struct {
	chanSource
	lists int
}

func (s *listingSource) List(ctx context.Context) ([]reflector.Item[int], uint64, error) {
	s.lists++
	return s.chanSource.List(ctx)
}

func (s *listingSource) Watch(ctx context.Context, _ uint64) (<-chan reflector.Event[int], error) {
	out := make(chan reflector.Event[int])
	go func() {
		defer close(out)
		for {
			select {
			case ev := <-s.events:
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// A relist at a revision below the one reached (the source restored from
// a backup, a new cluster) makes Revision the list's: the tables hold that
// state, not the one of the higher revision.
func TestRelistAtALowerRevision(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &listingSource{chanSource: chanSource{items: []reflector.Item[int]{{Table: "ta", Key: "a", Value: 1}}, rev: 10, events: make(chan reflector.Event[int])}}
		f := newMultiFixture(t, src, 100, time.Second, nil)
		f.run(t)
		synctest.Wait()
		src.events <- reflector.Event[int]{Kind: reflector.Progress, Revision: 20}
		synctest.Wait()
		if got := f.multi.Revision(); got != 20 {
			t.Fatalf("Revision %d, want 20", got)
		}
		_, moved := f.multi.RevisionWatch()
		src.items, src.rev = []reflector.Item[int]{{Table: "ta", Key: "b", Value: 2}}, 5
		src.events <- reflector.Event[int]{Kind: reflector.Resync}
		synctest.Wait()
		if got := f.snapshot(f.db.ReadTxn()); f.multi.Revision() != 5 || !maps.Equal(got, map[tk]int{{"ta", "b"}: 2}) {
			t.Fatalf("after a relist at 5: Revision %d, tables %v", f.multi.Revision(), got)
		}
		select {
		case <-moved:
		default:
			t.Fatal("RevisionWatch's channel did not close when Revision went back")
		}
	})
}
