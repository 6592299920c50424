package reconciler

import (
	"fmt"
	"strings"
	"testing"
)

// Health reads OK with the object count, Degraded with the number of
// failing objects and at most 10 of the latest errors, OK again once they
// recover, and Stopped at shutdown.
func TestHealth(t *testing.T) {
	f := newFixture(t, false)
	f.start()

	f.insertN("o", 20)
	f.mustReconcile()
	f.health.waitFor(t, "OK with 20 objects", func(r healthReport) bool {
		return r.level == "OK" && strings.Contains(r.reason, "20 objects")
	})

	// 15 objects start failing.
	var failing []*testObj
	for i := range 15 {
		key := fmt.Sprintf("o%04d", i)
		f.target.set(key, &behavior{forever: true})
		failing = append(failing, &testObj{ID: key, Value: 2})
	}
	f.insert(failing...)
	r := f.health.waitFor(t, "Degraded with 15 failing", func(r healthReport) bool {
		return r.level == "Degraded" && strings.Contains(r.reason, "15 of 20 objects failing")
	})
	_, latest, _ := strings.Cut(r.reason, "latest: ")
	if n := strings.Count(latest, "; ") + 1; latest == "" || n > maxRecentErrors {
		t.Errorf("Degraded reason lists %d errors, want 1..%d: %s", n, maxRecentErrors, r.reason)
	}
	if r.err == nil || !strings.Contains(r.err.Error(), "injected failure") {
		t.Errorf("Degraded error %v, want the latest failure", r.err)
	}

	for _, o := range failing {
		f.target.set(o.ID, nil)
	}
	f.health.waitFor(t, "OK again", func(r healthReport) bool {
		return r.level == "OK" && strings.Contains(r.reason, "20 objects")
	})

	f.stop()
	if last := f.health.last(); last.level != "Stopped" {
		t.Fatalf("last report %+v, want Stopped", last)
	}
}

// The object count follows inserts and deletes, even when nothing fails
// and nothing else happens afterwards.
func TestHealthObjectCount(t *testing.T) {
	f := newFixture(t, false)
	f.start()
	for _, n := range []int{3, 50} {
		f.insertN("o", n)
		f.mustReconcile()
		want := fmt.Sprintf("%d objects", n)
		f.health.waitFor(t, "OK "+want, func(r healthReport) bool {
			return r.level == "OK" && strings.Contains(r.reason, want)
		})
	}
	f.delete("o0000", "o0001")
	f.mustReconcile()
	f.health.waitFor(t, "OK 48 objects", func(r healthReport) bool {
		return r.level == "OK" && strings.Contains(r.reason, "48 objects")
	})
}
