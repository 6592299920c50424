package reconcilertest_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/steadystate/steadystate/reconciler/reconcilertest"
)

// Health records every report; WaitFor finds a report made since the last
// match, or the latest one again.
func TestHealth(t *testing.T) {
	var h reconcilertest.Health
	if _, ok := h.Last(); ok {
		t.Fatal("Last on an empty Health")
	}
	boom := errors.New("boom")
	h.OK("a")
	h.Degraded("b", boom)
	h.OK("c")

	// A short-lived Degraded is found although OK came after it.
	if r := h.WaitFor(t, reconcilertest.LevelDegraded, "b"); r.Err != boom {
		t.Fatalf("WaitFor(Degraded) = %v", r)
	}
	h.WaitFor(t, reconcilertest.LevelOK, "c")
	// The latest report matches again: the state lasts.
	h.WaitFor(t, reconcilertest.LevelOK, "c")
	h.Stopped("d")
	if last, _ := h.Last(); last.Level != reconcilertest.LevelStopped || last.Reason != "d" {
		t.Fatalf("Last = %v", last)
	}
	if got, want := fmt.Sprint(h.Reports()), "[OK: a Degraded: b (boom) OK: c Stopped: d]"; got != want {
		t.Fatalf("Reports = %s, want %s", got, want)
	}
	select {
	case <-h.Changed():
		t.Fatal("Changed is closed without a new report")
	default:
	}
	ch := h.Changed()
	h.OK("e")
	<-ch
}
