package etcd_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/steadystate/steadystate/etcd"
	"github.com/steadystate/steadystate/etcd/etcdtest"
)

// The client (v3.7) against Debian's etcd-server 3.4.23, which is end of
// life but what a Debian fleet may run: apply, reflect, publish a status
// and read the fleet view. CI installs it (STEADYSTATE_REQUIRE_ETCD=1 makes
// a missing server a failure, not a skip).
func TestDebianEtcdServer(t *testing.T) {
	bin, err := exec.LookPath("etcd")
	if err != nil || !strings.HasPrefix(bin, "/usr/bin/") {
		if os.Getenv("STEADYSTATE_REQUIRE_ETCD") == "1" {
			t.Fatalf("Debian's etcd-server is not installed (/usr/bin/etcd): %v", err)
		}
		t.Skip("Debian's etcd-server is not installed (apt-get install etcd-server)")
	}
	out, _ := exec.Command(bin, "--version").Output()
	t.Logf("server: %s", strings.SplitN(string(out), "\n", 2)[0])
	cl := etcdtest.StartCluster(t, bin, 1)
	c := cl.Client()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	l := etcd.Layout{}
	rev, err := etcd.Apply(ctx, c, l, "objs", etcd.ScopeAll, values("a", "1", "b", "2"))
	if err != nil {
		t.Fatal(err)
	}
	n := startNode(t, cl.Client(), l, "n1")
	n.waitFor(t, map[string]string{"a": "1", "b": "2"})
	if _, err := etcd.Apply(ctx, c, l, "objs", etcd.NodeScope("n1"), values("b", "own")); err != nil {
		t.Fatal(err)
	}
	n.waitFor(t, map[string]string{"a": "1", "b": "own"})

	p, err := etcd.StartPublisher(ctx, etcd.PublisherConfig{Client: c, Layout: l, Node: "n1", MinInterval: 10 * time.Millisecond},
		etcd.NodeStatus{Revision: rev, Objects: map[string]int{"Done": 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(ctx)
	v := waitView(t, c, l, "n1", func(v etcd.View) bool { return len(v.Nodes) == 1 })
	if got, want := v.Summary(rev), "applied on 1 of 1 nodes at revision "; !strings.HasPrefix(got, want) {
		t.Fatalf("summary %q", got)
	}
}
