package health_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/health"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// module is the scope of the module with the dotted id.
func module(t *health.Tree, id string) cell.Health {
	return t.Module(cell.FullModuleID(strings.Split(id, ".")))
}

func TestTree(t *testing.T) {
	tests := []struct {
		name  string
		build func(t *health.Tree)
		want  string // WriteText of the snapshot
	}{
		{
			name:  "empty: the root is Unknown",
			build: func(*health.Tree) {},
			want:  "hive  Unknown\n",
		},
		{
			name: "module with jobs aggregates the worst level",
			build: func(t *health.Tree) {
				m := module(t, "agent")
				m.NewScope("a").OK("fine")
				m.NewScope("b").Degraded("broken", errors.New("disk full"))
				m.NewScope("c").Stopped("done")
			},
			want: "hive  Degraded\n  agent  Degraded\n    a  OK  fine\n    b  Degraded  broken: disk full\n    c  Stopped  done\n",
		},
		{
			name: "a scope is the worst of its own report and its children; stopped ranks below OK",
			build: func(t *health.Tree) {
				m := module(t, "agent")
				m.OK("module fine")
				m.NewScope("x").Degraded("bad", nil)
				n := module(t, "other")
				n.OK("fine")
				n.NewScope("y").Stopped("done")
				n.NewScope("z").OK("")
			},
			want: "hive  Degraded\n  agent  Degraded  module fine\n    x  Degraded  bad\n  other  OK  fine\n    y  Stopped  done\n    z  OK\n",
		},
		{
			name: "a Degraded reconciler under a job that reports OK running",
			build: func(t *health.Tree) {
				job := module(t, "agent").NewScope("reconcile-routes")
				job.OK("running")
				job.NewScope("reconciler").Degraded("1 of 4 objects failing", errors.New("ENODEV"))
				module(t, "other").NewScope("job").OK("running")
			},
			want: "hive  Degraded\n  agent  Degraded\n    reconcile-routes  Degraded  running\n      reconciler  Degraded  1 of 4 objects failing: ENODEV\n  other  OK\n    job  OK  running\n",
		},
		{
			name: "a reported scope with a child that has not reported yet is Unknown",
			build: func(t *health.Tree) {
				job := module(t, "agent").NewScope("job")
				job.OK("running")
				job.NewScope("sub")
			},
			want: "hive  Unknown\n  agent  Unknown\n    job  Unknown  running\n      sub  Unknown\n",
		},
		{
			name: "duplicate names get suffixes; Module reuses the module's scope",
			build: func(t *health.Tree) {
				m := module(t, "m")
				m.NewScope("job").OK("first")
				m.NewScope("job").OK("second")
				module(t, "m").OK("same module scope")
				t.Root().NewScope("m").OK("not a module")
			},
			want: "hive  OK\n  m  OK  same module scope\n    job  OK  first\n    job#2  OK  second\n  m#2  OK  not a module\n",
		},
		{
			name: "a module whose name a job took first is suffixed",
			build: func(t *health.Tree) {
				module(t, "a").NewScope("b").OK("job b")
				module(t, "a.b").OK("module b")
				module(t, "a.b").NewScope("j").OK("in module b")
			},
			want: "hive  OK\n  a  OK\n    b  OK  job b\n    b#2  OK  module b\n      j  OK  in module b\n",
		},
		{
			name: "closed scopes leave the tree and ignore updates",
			build: func(t *health.Tree) {
				m := module(t, "m")
				j := m.NewScope("job")
				sub := j.NewScope("sub")
				j.Close()
				j.OK("ignored")
				sub.Degraded("ignored", nil)
				sub.NewScope("born-closed").OK("ignored")
				m.NewScope("job").OK("new one")
			},
			want: "hive  OK\n  m  OK\n    job  OK  new one\n",
		},
		{
			name: "starting: the root is Unknown although every scope is OK",
			build: func(t *health.Tree) {
				module(t, "m").NewScope("job").OK("running")
				t.Starting()
			},
			want: "hive  Unknown  starting\n  m  OK\n    job  OK  running\n",
		},
		{
			name: "starting: Degraded still shows at the root",
			build: func(t *health.Tree) {
				module(t, "m").NewScope("job").Degraded("failed", nil)
				t.Starting()
			},
			want: "hive  Degraded  starting\n  m  Degraded\n    job  Degraded  failed\n",
		},
		{
			name: "started: the root is its scopes' worst again",
			build: func(t *health.Tree) {
				t.Starting()
				module(t, "m").NewScope("job").OK("running")
				t.Started()
			},
			want: "hive  OK\n  m  OK\n    job  OK  running\n",
		},
		{
			name: "stopping: the root is Stopped although every scope is OK",
			build: func(t *health.Tree) {
				module(t, "m").NewScope("job").OK("running")
				t.Stopping()
			},
			want: "hive  Stopped  stopping\n  m  OK\n    job  OK  running\n",
		},
		{
			name: "closing the root clears it",
			build: func(t *health.Tree) {
				module(t, "m").OK("x")
				t.Root().Close()
			},
			want: "hive  Unknown\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tree := health.NewTree()
			tt.build(tree)
			var b strings.Builder
			if err := tree.Snapshot().WriteText(&b); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Fatalf("tree\n%s\nwant\n%s", b.String(), tt.want)
			}
		})
	}
}

func TestStatusJSONAndIDs(t *testing.T) {
	tree := health.NewTree()
	module(tree, "agent.routes").NewScope("sync").Degraded("failed", errors.New("timeout"))
	b, err := json.Marshal(tree.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	var st health.Status
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	leaf := st.Children[0].Children[0].Children[0]
	if leaf.ID != "agent.routes.sync" || leaf.Name != "sync" || leaf.Error != "timeout" || leaf.Updated.IsZero() {
		t.Fatalf("leaf %+v", leaf)
	}
	if st.ID != "" || st.Name != "hive" || st.Level != health.LevelDegraded {
		t.Fatalf("root %+v", st)
	}
	if tree.Module(nil) != tree.Root() {
		t.Fatal("Module of the empty id is not the root")
	}
}

func TestMetrics(t *testing.T) {
	tests := []struct {
		name  string
		build func(t *health.Tree)
		want  string // the exposition of steadystate_health_scopes, without HELP and TYPE
	}{
		{
			name:  "empty tree: no series",
			build: func(*health.Tree) {},
		},
		{
			name: "jobs count in their module; grouping scopes do not",
			build: func(t *health.Tree) {
				m := module(t, "agent")
				m.NewScope("a").OK("")
				m.NewScope("b").Degraded("", nil)
				m.NewScope("c").Degraded("", nil)
				module(t, "agent.routes").NewScope("sync") // Unknown until it reports
			},
			want: `
steadystate_health_scopes{level="Degraded",module="agent"} 2
steadystate_health_scopes{level="Degraded",module="agent.routes"} 0
steadystate_health_scopes{level="OK",module="agent"} 1
steadystate_health_scopes{level="OK",module="agent.routes"} 0
steadystate_health_scopes{level="Stopped",module="agent"} 0
steadystate_health_scopes{level="Stopped",module="agent.routes"} 0
steadystate_health_scopes{level="Unknown",module="agent"} 0
steadystate_health_scopes{level="Unknown",module="agent.routes"} 1
`,
		},
		{
			name: "a job counts at its effective level: a Degraded reconciler below makes it Degraded",
			build: func(t *health.Tree) {
				m := module(t, "agent")
				job := m.NewScope("reconcile-routes")
				job.OK("running")
				job.NewScope("reconciler").Degraded("failing", nil)
				m.NewScope("other-job").OK("running")
			},
			want: `
steadystate_health_scopes{level="Degraded",module="agent"} 2
steadystate_health_scopes{level="OK",module="agent"} 1
steadystate_health_scopes{level="Stopped",module="agent"} 0
steadystate_health_scopes{level="Unknown",module="agent"} 0
`,
		},
		{
			name: "a module's own report counts; scopes outside modules are module \"\"",
			build: func(t *health.Tree) {
				module(t, "m").Stopped("done")
				t.Root().NewScope("root-job").OK("")
			},
			want: `
steadystate_health_scopes{level="Degraded",module=""} 0
steadystate_health_scopes{level="Degraded",module="m"} 0
steadystate_health_scopes{level="OK",module=""} 1
steadystate_health_scopes{level="OK",module="m"} 0
steadystate_health_scopes{level="Stopped",module=""} 0
steadystate_health_scopes{level="Stopped",module="m"} 1
steadystate_health_scopes{level="Unknown",module=""} 0
steadystate_health_scopes{level="Unknown",module="m"} 0
`,
		},
	}
	const header = `
# HELP steadystate_health_scopes Health scopes of a module at each level: the module's own scope once it reported, and the scopes of its jobs and components (not those of its sub-modules), each at its effective level: the worst of its own and its children's. Scopes that only group others (never reported, with children) are not counted. Label module is the full module id ("" for scopes outside every module).
# TYPE steadystate_health_scopes gauge`
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tree := health.NewTree()
			tt.build(tree)
			reg := prometheus.NewRegistry()
			reg.MustRegister(tree)
			want := ""
			if tt.want != "" {
				want = header + tt.want
			}
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "steadystate_health_scopes"); err != nil {
				t.Fatal(err)
			}
		})
	}
}
