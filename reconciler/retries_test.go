package reconciler

import (
	"slices"
	"testing"
	"time"
)

// The retry queue keeps one retry per key, in time order.
func TestRetryQueue(t *testing.T) {
	q := newRetryQueue[int]()
	now := time.Now()
	q.add(&retryItem[int]{key: "a", at: now.Add(3)})
	q.add(&retryItem[int]{key: "b", at: now.Add(1)})
	q.add(&retryItem[int]{key: "a", at: now.Add(2)}) // replaces a
	q.add(&retryItem[int]{key: "c", at: now.Add(time.Hour)})
	q.remove("c")
	q.remove("nope")
	if q.len() != 2 {
		t.Fatalf("len %d, want 2", q.len())
	}
	if it, ok := q.get("a"); !ok || !it.at.Equal(now.Add(2)) {
		t.Fatalf("get(a) = %v, %v; want the later retry of a", it, ok)
	}
	var keys []string
	for _, it := range q.popDue(now.Add(10), 10) {
		keys = append(keys, it.key)
	}
	if !slices.Equal(keys, []string{"b", "a"}) || q.len() != 0 {
		t.Fatalf("popDue: %v, %d left", keys, q.len())
	}
	if _, ok := q.next(); ok {
		t.Fatal("next on an empty queue")
	}
}
