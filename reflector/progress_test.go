package reflector_test

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reflector"
	"github.com/steadystate/steadystate/statedb"
)

// chanSource lists items at a revision once, and then its watch sends what
// the test puts on events.
type chanSource struct {
	items  []reflector.Item[int]
	rev    uint64
	events chan reflector.Event[int]
}

func (s *chanSource) List(context.Context) ([]reflector.Item[int], uint64, error) {
	return s.items, s.rev, nil
}

func (s *chanSource) Watch(context.Context, uint64) (<-chan reflector.Event[int], error) {
	return s.events, nil
}

// countMetrics counts events and batches.
type countMetrics struct {
	reflector.NopMetrics
	mu              sync.Mutex
	events, batches int
}

func (m *countMetrics) Events(_ string, n int) { m.mu.Lock(); m.events += n; m.mu.Unlock() }
func (m *countMetrics) BatchCommitted(string, int, time.Duration) {
	m.mu.Lock()
	m.batches++
	m.mu.Unlock()
}

func (m *countMetrics) counts() (events, batches int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.events, m.batches
}

// A Progress event commits what is pending at once and moves Revision: a
// progress at or below the revision reached does nothing. Without one, a
// revision is whole once a later one's event came, or the source was
// quiet for BatchInterval. Each step runs in a synctest bubble until every goroutine is
// blocked, so "nothing happened" is exact.
func TestProgress(t *testing.T) {
	type step struct {
		send  reflector.Event[int] // sent to the watch, unless Kind is 0
		sleep time.Duration        // fake time passing after the send
		want  uint64               // Revision after the step
		table map[string]int       // the table after the step
	}
	put := func(key string, v int, rev uint64) reflector.Event[int] {
		return reflector.Event[int]{Kind: reflector.Put, Key: key, Value: v, Revision: rev}
	}
	progress := func(rev uint64) reflector.Event[int] {
		return reflector.Event[int]{Kind: reflector.Progress, Revision: rev}
	}
	listed := map[string]int{"x": 1} // listed at revision 10
	cases := []struct {
		name    string
		steps   []step
		batches int // with puts: commits, the list's included
	}{
		{"nothing pending: at once", []step{
			{send: progress(15), want: 15, table: listed},
		}, 1},
		{"a pending put: committed at once", []step{
			{send: put("a", 2, 11), want: 10, table: listed},
			{send: progress(15), want: 15, table: map[string]int{"x": 1, "a": 2}},
		}, 2},
		{"a pending put: its revision whole by a later event, committed by time", []step{
			{send: put("a", 2, 11), want: 10, table: listed},
			{send: put("b", 3, 14), want: 10, table: listed},
			{sleep: time.Second, want: 14, table: map[string]int{"x": 1, "a": 2, "b": 3}},
		}, 2},
		{"a pending put: committed by size once whole", []step{
			{send: put("a", 2, 11), want: 10, table: listed},
			{send: put("b", 3, 12), want: 10, table: listed},
			{send: put("c", 4, 13), want: 12, table: map[string]int{"x": 1, "a": 2, "b": 3}},
			{send: progress(13), want: 13, table: map[string]int{"x": 1, "a": 2, "b": 3, "c": 4}},
		}, 3},
		{"a put after a progress", []step{
			{send: progress(15), want: 15, table: listed},
			{send: put("a", 2, 16), want: 15, table: listed},
			{sleep: time.Second, want: 16, table: map[string]int{"x": 1, "a": 2}},
		}, 2},
		{"stale: ignored", []step{
			{send: progress(15), want: 15, table: listed},
			{send: progress(15), want: 15, table: listed},
			{send: progress(12), want: 15, table: listed},
			{send: progress(10), want: 15, table: listed},
			{send: progress(3), want: 15, table: listed},
			{sleep: time.Hour, want: 15, table: listed},
		}, 1},
		{"at or below the list: ignored", []step{
			{send: progress(10), want: 10, table: listed},
			{send: progress(4), want: 10, table: listed},
		}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				db := statedb.New()
				table, err := statedb.NewTable(db, "objs", nameIndex)
				if err != nil {
					t.Fatal(err)
				}
				src := &chanSource{items: []reflector.Item[int]{{Key: "x", Value: 1}}, rev: 10, events: make(chan reflector.Event[int])}
				metrics := &countMetrics{}
				r, err := reflector.New(db, reflector.Config[int, *obj]{
					Name:   "test",
					Source: src,
					Writer: reconciler.DesiredWriter[*obj]{
						Table:           table,
						Equal:           func(a, b *obj) bool { return a.Value == b.Value },
						SetObjectStatus: func(o *obj, s reconciler.Status) *obj { o.Status = s; return o },
					},
					Transform:     func(key string, v int) (*obj, error) { return &obj{Name: key, Value: v}, nil },
					BatchSize:     2,
					BatchInterval: time.Second,
					Metrics:       metrics,
					Logger:        slog.New(slog.NewTextHandler(t.Output(), nil)),
				})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan struct{})
				go func() { defer close(done); r.Run(ctx) }()
				defer func() { cancel(); <-done }()
				synctest.Wait()
				f := &fixture{db: db, table: table}
				if got, _ := f.contents(); r.Revision() != 10 || !maps.Equal(got, listed) {
					t.Fatalf("after the list: Revision %d, table %v", r.Revision(), got)
				}
				puts := 0
				for i, st := range tc.steps {
					if st.send.Kind != 0 {
						src.events <- st.send
						if st.send.Kind == reflector.Put {
							puts++
						}
					}
					time.Sleep(st.sleep)
					synctest.Wait()
					if got, _ := f.contents(); r.Revision() != st.want || !maps.Equal(got, st.table) {
						t.Fatalf("step %d (%v at %d): Revision %d, table %v; want %d, %v",
							i, st.send.Kind, st.send.Revision, r.Revision(), got, st.want, st.table)
					}
				}
				// Progress is not an object event: it is neither counted
				// nor committed.
				events, batches := metrics.counts()
				wantBatches := 1 // the list
				if puts > 0 {
					wantBatches = tc.batches
				}
				if events != puts || batches != wantBatches {
					t.Fatalf("%d events and %d batches counted, want %d and %d", events, batches, puts, wantBatches)
				}
			})
		})
	}
}
