package fleetcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/steadystate/steadystate/etcd"
	"github.com/steadystate/steadystate/etcd/etcdtest"
)

// fleetFixture is an etcd process, a prefix of the test's own, and the
// fleet's desired state applied to it.
type fleetFixture struct {
	t   *testing.T
	c   *clientv3.Client
	eps string
	l   etcd.Layout
	rev int64 // the desired state's revision
}

// newFleetFixture applies a desired state (one object per table) under a
// prefix named after the test, on an etcd process (one per test).
func newFleetFixture(t *testing.T, cl *etcdtest.Cluster) *fleetFixture {
	t.Helper()
	f := &fleetFixture{t: t, c: cl.Client(), eps: strings.Join(cl.Endpoints(), ","), l: etcd.Layout{Prefix: "/wait/" + t.Name()}}
	tables := map[string]map[string][]byte{}
	for _, table := range testTables {
		tables[table] = map[string][]byte{"o": []byte(table)}
	}
	var err error
	if f.rev, err = etcd.ApplyTables(t.Context(), f.c, f.l, etcd.ScopeAll, tables); err != nil {
		t.Fatal(err)
	}
	return f
}

// node publishes node's status until the test ends.
func (f *fleetFixture) node(name string, st etcd.NodeStatus) *etcd.Publisher {
	f.t.Helper()
	p, err := etcd.StartPublisher(f.t.Context(), etcd.PublisherConfig{Client: f.c, Layout: f.l, Node: name, MinInterval: time.Millisecond}, st)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { p.Stop(context.Background()) })
	return p
}

// lost makes node a lost node: a record, no status.
func (f *fleetFixture) lost(name string, rev int64) {
	f.t.Helper()
	rec := fmt.Sprintf(`{"node":%q,"revision":%d,"objects":{"Done":3},"lastSeen":"2026-01-02T03:04:05Z"}`, name, rev)
	if _, err := f.c.Put(f.t.Context(), f.l.Record(name), rec); err != nil {
		f.t.Fatal(err)
	}
}

// run runs `fleet ARGS` in the process and returns its exit code, stdout
// and stderr.
func (f *fleetFixture) run(args ...string) (int, string, string) {
	cmd := Command(testConfig)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(append(args, "--etcd-endpoints", f.eps, "--etcd-prefix", f.l.Prefix))
	code := 0
	if err := cmd.Execute(); err != nil {
		code = 1
		var exit ExitError
		if errors.As(err, &exit) {
			code = exit.Code
		}
		fmt.Fprintln(&errOut, err)
	}
	return code, out.String(), errOut.String()
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func done(n int) map[string]int { return map[string]int{"Done": n} }

// `fleet status --wait` exits 0 once every live node applied the latest
// desired state (a lost node does not count, and is said), 1 as soon as a
// live node that received it reports an error, 2 on timeout; it prints
// the status last read every time.
func TestFleetStatusWait(t *testing.T) {
	cl := etcdtest.StartCluster(t, etcdtest.Binary(t), 1)

	t.Run("applied", func(t *testing.T) {
		f := newFleetFixture(t, cl)
		f.node("n1", etcd.NodeStatus{Revision: f.rev, Objects: done(3)})
		f.node("n2", etcd.NodeStatus{Revision: f.rev + 5, Objects: done(3)})
		f.lost("n3", f.rev-1)
		code, out, errOut := f.run("status", "--wait", "--timeout", "30s")
		want := fmt.Sprintf("applied on 2 of 3 nodes at revision %d (1 lost)", f.rev)
		if code != 0 || lastLine(out) != want {
			t.Fatalf("exit %d, want 0; last line %q, want %q\n%s%s", code, lastLine(out), want, out, errOut)
		}
	})

	t.Run("error", func(t *testing.T) {
		f := newFleetFixture(t, cl)
		f.node("n1", etcd.NodeStatus{Revision: f.rev, Objects: done(3)})
		f.node("n2", etcd.NodeStatus{Revision: f.rev, Objects: map[string]int{"Done": 2, "Error": 1}, Errors: []string{"routes 254/10.0.0.0/8/0: boom"}})
		code, out, errOut := f.run("status", "--wait", "--timeout", "30s")
		if code != WaitFailed || !strings.Contains(errOut, "n2 (Error=1") || !strings.Contains(errOut, "boom") ||
			lastLine(out) != fmt.Sprintf("applied on 1 of 2 nodes at revision %d", f.rev) {
			t.Fatalf("exit %d, want 1 naming n2\n%s%s", code, out, errOut)
		}
	})

	t.Run("rejected", func(t *testing.T) {
		f := newFleetFixture(t, cl)
		f.node("n1", etcd.NodeStatus{Revision: f.rev, Objects: map[string]int{"Done": 2, etcd.Rejected: 1}})
		if code, out, errOut := f.run("status", "--wait", "--timeout", "30s"); code != WaitFailed || !strings.Contains(errOut, "Rejected=1") {
			t.Fatalf("exit %d, want 1\n%s%s", code, out, errOut)
		}
	})

	t.Run("delete failing", func(t *testing.T) {
		f := newFleetFixture(t, cl)
		f.node("n1", etcd.NodeStatus{Revision: f.rev, Objects: map[string]int{"Done": 2, etcd.DeleteFailing: 1}})
		if code, out, errOut := f.run("status", "--wait", "--timeout", "30s"); code != WaitFailed || !strings.Contains(errOut, etcd.DeleteFailing+"=1") {
			t.Fatalf("exit %d, want 1 naming %s\n%s%s", code, etcd.DeleteFailing, out, errOut)
		}
	})

	t.Run("no live node", func(t *testing.T) {
		// Lost nodes only, then none at all: nothing is applied anywhere
		// known, so it waits (here until the timeout).
		f := newFleetFixture(t, cl)
		f.lost("n1", f.rev)
		f.lost("n2", f.rev)
		if code, out, errOut := f.run("status", "--wait", "--timeout", "300ms"); code != WaitTimedOut ||
			lastLine(out) != fmt.Sprintf("applied on 0 of 2 nodes at revision %d (2 lost)", f.rev) {
			t.Fatalf("only lost nodes: exit %d, want 2\n%s%s", code, out, errOut)
		}
		g := newFleetFixture(t, cl)
		if code, out, errOut := g.run("status", "--wait", "--timeout", "300ms"); code != WaitTimedOut {
			t.Fatalf("no node at all: exit %d, want 2\n%s%s", code, out, errOut)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		f := newFleetFixture(t, cl)
		f.node("n1", etcd.NodeStatus{Revision: f.rev, Objects: done(3)})
		f.node("n2", etcd.NodeStatus{Revision: f.rev, Objects: map[string]int{"Done": 2, "Pending": 1}})
		// An error of an older desired state is not an error of this one.
		f.node("n3", etcd.NodeStatus{Revision: f.rev - 1, Objects: map[string]int{"Done": 2, "Error": 1}})
		start := time.Now()
		code, out, errOut := f.run("status", "--wait", "--timeout", "500ms")
		if code != WaitTimedOut || !strings.Contains(errOut, "timed out after 500ms") || !strings.Contains(out, "NODE") ||
			lastLine(out) != fmt.Sprintf("applied on 1 of 3 nodes at revision %d", f.rev) {
			t.Fatalf("exit %d, want 2 with the table\n%s%s", code, out, errOut)
		}
		if took := time.Since(start); took < 500*time.Millisecond {
			t.Fatalf("timed out after %v, before --timeout 500ms", took)
		}
	})

	t.Run("a revision not written yet", func(t *testing.T) {
		f := newFleetFixture(t, cl)
		f.node("n1", etcd.NodeStatus{Revision: f.rev + 100, Objects: done(3)})
		if code, out, errOut := f.run("status", "--wait", "--revision", fmt.Sprint(f.rev+100), "--timeout", "300ms"); code != WaitTimedOut {
			t.Fatalf("exit %d, want 2: the desired state of revision %d does not exist\n%s%s", code, f.rev+100, out, errOut)
		}
	})

	t.Run("usage", func(t *testing.T) {
		f := newFleetFixture(t, cl)
		for _, args := range [][]string{{"status", "--revision", "3"}, {"status", "--timeout", "1s"}, {"status", "--wait", "--timeout", "0s"}} {
			if code, _, errOut := f.run(args...); code != ExitUsage || errOut == "" {
				t.Errorf("%v: exit %d (%s), want %d", args, code, errOut, ExitUsage)
			}
		}
		status, _, _ := Command(testConfig).Find([]string{"status"})
		if def := status.Flags().Lookup("timeout").DefValue; def != defaultWaitTimeout.String() || defaultWaitTimeout != 5*time.Minute {
			t.Errorf("--timeout defaults to %s, documented 5m", def)
		}
	})

	// The wait follows etcd: each change is made when it starts waiting
	// (not before its first read), and the watch wakes it.
	follow := func(t *testing.T, change func(f *fleetFixture, p *etcd.Publisher)) error {
		f := newFleetFixture(t, cl)
		p := f.node("n1", etcd.NodeStatus{Revision: f.rev, Objects: map[string]int{"Pending": 3}})
		f.node("n2", etcd.NodeStatus{Revision: f.rev, Objects: done(3)})
		waits := 0
		o := waitOptions{timeout: 30 * time.Second, waiting: func() {
			if waits++; waits == 1 {
				change(f, p)
			}
		}}
		var out bytes.Buffer
		err := waitFleet(t.Context(), f.c, f.l, testTables, o, &out, io.Discard, "table")
		if waits < 1 {
			t.Fatalf("it never waited: %v\n%s", err, out.String())
		}
		return err
	}
	t.Run("follows to applied", func(t *testing.T) {
		err := follow(t, func(f *fleetFixture, p *etcd.Publisher) {
			p.Publish(etcd.NodeStatus{Revision: f.rev, Objects: done(3)})
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Run("follows to an error", func(t *testing.T) {
		err := follow(t, func(f *fleetFixture, p *etcd.Publisher) {
			p.Publish(etcd.NodeStatus{Revision: f.rev, Objects: map[string]int{"Done": 2, "Error": 1}})
		})
		var exit ExitError
		if !errors.As(err, &exit) || exit.Code != WaitFailed {
			t.Fatalf("%v, want exit 1", err)
		}
	})
	t.Run("follows a node lost", func(t *testing.T) {
		// The pending node dies: the others applied, exit 0.
		err := follow(t, func(f *fleetFixture, p *etcd.Publisher) {
			if _, err := f.c.Delete(t.Context(), f.l.Status("n1")); err != nil {
				t.Error(err)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}
