package etcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/steadystate/steadystate/etcd"
	"github.com/steadystate/steadystate/etcd/etcdtest"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
)

// The fault tests run a real 3-member cluster of etcd v3.7 processes and
// two nodes (a reflector each, as an agent has) against it.
func TestClusterFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-member etcd cluster")
	}
	cl := etcdtest.StartCluster(t, etcdtest.Binary(t), 3)
	c := cl.Client()
	l := etcd.Layout{}
	// apply retries as an operator would: a request caught on a member
	// that just died or froze fails, the next goes to another.
	apply := func(kv ...string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			_, err := etcd.Apply(ctx, c, l, "objs", etcd.ScopeAll, values(kv...))
			cancel()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("apply %v: %v", kv, err)
			}
			t.Logf("apply %v: %v; again", kv, err)
		}
	}
	apply("a", "1")
	n1, n2 := startNode(t, cl.Client(), l, "n1"), startNode(t, cl.Client(), l, "n2")
	n1.waitFor(t, map[string]string{"a": "1"})
	n2.waitFor(t, map[string]string{"a": "1"})

	t.Run("one member killed", func(t *testing.T) {
		cl.Kill(0)
		apply("a", "2")
		n1.waitFor(t, map[string]string{"a": "2"})
		n2.waitFor(t, map[string]string{"a": "2"})
		cl.Restart(0)
		cl.WaitHealthy()
	})

	t.Run("one member paused", func(t *testing.T) {
		cl.Pause(1)
		apply("a", "3", "b", "3")
		n1.waitFor(t, map[string]string{"a": "3", "b": "3"})
		n2.waitFor(t, map[string]string{"a": "3", "b": "3"})
		cl.Resume(1)
		cl.WaitHealthy()
	})

	t.Run("every member killed", func(t *testing.T) {
		for i := range 3 {
			cl.Kill(i)
		}
		// The nodes keep the last desired state and say they cannot
		// reach the source.
		n1.health.WaitFor(t, reconcilertest.LevelDegraded, "source")
		n1.waitFor(t, map[string]string{"a": "3", "b": "3"})
		n2.waitFor(t, map[string]string{"a": "3", "b": "3"})
		for i := range 3 {
			cl.Restart(i)
		}
		cl.WaitHealthy()
		// Back: they resume and converge on what changes next.
		apply("b", "4")
		n1.waitFor(t, map[string]string{"b": "4"})
		n2.waitFor(t, map[string]string{"b": "4"})
		n1.health.WaitFor(t, reconcilertest.LevelOK, "")
	})
}
