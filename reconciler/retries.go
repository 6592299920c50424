package reconciler

import (
	"container/heap"
	"time"

	"github.com/steadystate/steadystate/internal/backoff"
	"github.com/steadystate/steadystate/statedb"
)

// retryItem is a failed operation waiting for its next attempt.
type retryItem[Obj any] struct {
	key      string // primary key
	obj      Obj    // the object as last attempted
	rev      statedb.Revision
	deleted  bool // a Delete to retry; otherwise an Update
	refresh  bool // the Update was a refresh: drift it repairs is counted
	plan     Plan // the refresh's plan, if it was planned: the drift found
	found    FoundBy
	attempts int
	at       time.Time // when to retry
	err      error     // the last failure
	pos      int       // position in the heap
}

// retryQueue holds at most one retry per primary key, ordered by time. A
// newer attempt for the same key replaces the older one (the package doc's
// "One failing object delays no other").
type retryQueue[Obj any] struct {
	byKey map[string]*retryItem[Obj]
	heap  retryHeap[Obj]
}

func newRetryQueue[Obj any]() *retryQueue[Obj] {
	return &retryQueue[Obj]{byKey: map[string]*retryItem[Obj]{}}
}

func (q *retryQueue[Obj]) len() int { return len(q.heap) }

// get returns the pending retry of key.
func (q *retryQueue[Obj]) get(key string) (*retryItem[Obj], bool) {
	it, ok := q.byKey[key]
	return it, ok
}

// add schedules a retry, replacing any pending one of the same key.
func (q *retryQueue[Obj]) add(it *retryItem[Obj]) {
	if old, ok := q.byKey[it.key]; ok {
		heap.Remove(&q.heap, old.pos)
	}
	q.byKey[it.key] = it
	heap.Push(&q.heap, it)
}

// remove cancels the pending retry of key, if any.
func (q *retryQueue[Obj]) remove(key string) {
	if it, ok := q.byKey[key]; ok {
		heap.Remove(&q.heap, it.pos)
		delete(q.byKey, key)
	}
}

// next returns when the earliest retry is due.
func (q *retryQueue[Obj]) next() (time.Time, bool) {
	if len(q.heap) == 0 {
		return time.Time{}, false
	}
	return q.heap[0].at, true
}

// expedite makes every pending retry due at now at the latest.
func (q *retryQueue[Obj]) expedite(now time.Time) {
	for _, it := range q.heap {
		if it.at.After(now) {
			it.at = now
		}
	}
	heap.Init(&q.heap)
}

// expediteKey makes the pending retry of key, if any, due at now at the
// latest, and reports whether there was one.
func (q *retryQueue[Obj]) expediteKey(key string, now time.Time) bool {
	it, ok := q.byKey[key]
	if !ok {
		return false
	}
	if it.at.After(now) {
		it.at = now
		heap.Fix(&q.heap, it.pos)
	}
	return true
}

// lowestRevision returns the lowest revision of a pending retry (0 if none).
func (q *retryQueue[Obj]) lowestRevision() statedb.Revision {
	var lowest statedb.Revision
	for _, it := range q.heap {
		if lowest == 0 || it.rev < lowest {
			lowest = it.rev
		}
	}
	return lowest
}

// popDue removes and returns up to limit retries due at now.
func (q *retryQueue[Obj]) popDue(now time.Time, limit int) []*retryItem[Obj] {
	var out []*retryItem[Obj]
	for len(q.heap) > 0 && len(out) < limit && !q.heap[0].at.After(now) {
		it := heap.Pop(&q.heap).(*retryItem[Obj])
		delete(q.byKey, it.key)
		out = append(out, it)
	}
	return out
}

// backoff returns the delay before the retry that follows the given number
// of failed attempts: the project's one backoff (internal/backoff) between
// Config.RetryBackoffMin and RetryBackoffMax, so a reconciler and a hive job
// given the same bounds wait the same.
func retryWait(attempts int, minD, maxD time.Duration) time.Duration {
	return backoff.Backoff{Min: minD, Max: maxD}.Duration(attempts)
}

// The reconciler's documented defaults are the shared backoff's: this fails
// to compile if they drift apart (a constant array length must not be
// negative, and [0]byte takes only a zero-length array).
var (
	_ [0]byte = [DefaultRetryBackoffMin - backoff.DefaultMin]byte{}
	_ [0]byte = [DefaultRetryBackoffMax - backoff.DefaultMax]byte{}
)

type retryHeap[Obj any] []*retryItem[Obj]

func (h retryHeap[Obj]) Len() int           { return len(h) }
func (h retryHeap[Obj]) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h retryHeap[Obj]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].pos, h[j].pos = i, j
}
func (h *retryHeap[Obj]) Push(x any) {
	it := x.(*retryItem[Obj])
	it.pos = len(*h)
	*h = append(*h, it)
}
func (h *retryHeap[Obj]) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return it
}
