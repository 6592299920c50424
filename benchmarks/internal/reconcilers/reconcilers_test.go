package reconcilers

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRuns: every side reconciles every object (each run fails the test
// unless all are Done and the target saw each once) and reports a time
// and a heap.
func TestRuns(t *testing.T) {
	const n = 2500 // not a multiple of Batch
	for name, run := range map[string]Run{"steadystate": Steadystate, "cilium": Cilium(false), "cilium-lean": Cilium(true)} {
		t.Run(name, func(t *testing.T) {
			if d, heap := run(t, n); d <= 0 || heap == 0 {
				t.Fatalf("run = %v, %d", d, heap)
			}
		})
	}
}
