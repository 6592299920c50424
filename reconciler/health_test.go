package reconciler_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/steadystate/steadystate/reconciler/reconcilertest"
)

// Health reads OK with the object count, Degraded with the number of
// failing objects and at most 10 of the latest errors, OK again once they
// recover, and Stopped at shutdown.
func TestHealth(t *testing.T) {
	f := newFixture(t, false)
	f.start()

	f.insertN("o", 20)
	f.mustReconcile()
	f.health.WaitFor(t, reconcilertest.LevelOK, "20 objects")

	// 15 objects start failing.
	var failing []*testObj
	for i := range 15 {
		key := fmt.Sprintf("o%04d", i)
		f.target.Inject(key, reconcilertest.Fault{})
		failing = append(failing, &testObj{ID: key, Value: 2})
	}
	f.insert(failing...)
	r := f.health.WaitFor(t, reconcilertest.LevelDegraded, "15 of 20 objects failing")
	_, latest, _ := strings.Cut(r.Reason, "latest: ")
	if n := strings.Count(latest, "; ") + 1; latest == "" || n > 10 {
		t.Errorf("Degraded reason lists %d errors, want 1..10: %s", n, r.Reason)
	}
	if r.Err == nil || !strings.Contains(r.Err.Error(), "injected failure") {
		t.Errorf("Degraded error %v, want the latest failure", r.Err)
	}

	for _, o := range failing {
		f.target.Clear(o.ID)
	}
	f.health.WaitFor(t, reconcilertest.LevelOK, "20 objects")

	f.rec.Stop()
	if last, _ := f.health.Last(); last.Level != reconcilertest.LevelStopped {
		t.Fatalf("last report %v, want Stopped", last)
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
		f.health.WaitFor(t, reconcilertest.LevelOK, fmt.Sprintf("%d objects", n))
	}
	f.delete("o0000", "o0001")
	f.mustReconcile()
	f.health.WaitFor(t, reconcilertest.LevelOK, "48 objects")
}
