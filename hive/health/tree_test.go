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

func TestTree(t *testing.T) {
	tests := []struct {
		name   string
		build  func(t *health.Tree)
		want   string // WriteText of the snapshot
		counts map[cell.Level]int
	}{
		{
			name:   "empty",
			build:  func(*health.Tree) {},
			want:   "hive  Unknown\n",
			counts: map[cell.Level]int{},
		},
		{
			name: "module with jobs aggregates the worst level",
			build: func(t *health.Tree) {
				m := t.Scope("agent")
				m.NewScope("a").OK("fine")
				m.NewScope("b").Degraded("broken", errors.New("disk full"))
				m.NewScope("c").Stopped("done")
			},
			want:   "hive  Degraded\n  agent  Degraded\n    a  OK  fine\n    b  Degraded  broken: disk full\n    c  Stopped  done\n",
			counts: map[cell.Level]int{cell.LevelOK: 1, cell.LevelDegraded: 1, cell.LevelStopped: 1},
		},
		{
			name: "own report wins over children; stopped ranks below OK",
			build: func(t *health.Tree) {
				m := t.Scope("agent")
				m.OK("module fine")
				m.NewScope("x").Degraded("bad", nil)
				n := t.Scope("other")
				n.NewScope("y").Stopped("done")
				n.NewScope("z").OK("")
			},
			want:   "hive  OK\n  agent  OK  module fine\n    x  Degraded  bad\n  other  OK\n    y  Stopped  done\n    z  OK\n",
			counts: map[cell.Level]int{cell.LevelOK: 2, cell.LevelDegraded: 1, cell.LevelStopped: 1},
		},
		{
			name: "duplicate names get suffixes; Scope reuses",
			build: func(t *health.Tree) {
				m := t.Scope("m")
				m.NewScope("job")
				m.NewScope("job")
				t.Scope("m", "job").OK("same as the first")
			},
			want:   "hive  Unknown\n  m  Unknown\n    job  OK  same as the first\n    job#2  Unknown\n",
			counts: map[cell.Level]int{cell.LevelOK: 1, cell.LevelUnknown: 1},
		},
		{
			name: "closed scopes leave the tree and ignore updates",
			build: func(t *health.Tree) {
				m := t.Scope("m")
				j := m.NewScope("job")
				sub := j.NewScope("sub")
				j.Close()
				j.OK("ignored")
				sub.Degraded("ignored", nil)
				sub.NewScope("born-closed").OK("ignored")
				m.NewScope("job").OK("new one")
			},
			want:   "hive  OK\n  m  OK\n    job  OK  new one\n",
			counts: map[cell.Level]int{cell.LevelOK: 1},
		},
		{
			name: "closing the root clears it",
			build: func(t *health.Tree) {
				t.Scope("m").OK("x")
				t.Root().Close()
			},
			want:   "hive  Unknown\n",
			counts: map[cell.Level]int{},
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
			got := tree.Counts()
			if len(got) != len(tt.counts) {
				t.Fatalf("counts %v, want %v", got, tt.counts)
			}
			for l, n := range tt.counts {
				if got[l] != n {
					t.Fatalf("counts %v, want %v", got, tt.counts)
				}
			}
		})
	}
}

func TestStatusJSONAndIDs(t *testing.T) {
	tree := health.NewTree()
	tree.Scope("agent", "routes").NewScope("sync").Degraded("failed", errors.New("timeout"))
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
	if st.ID != "" || st.Name != "hive" || st.Level != cell.LevelDegraded {
		t.Fatalf("root %+v", st)
	}
	if all := tree.All(); len(all) != 1 || all[0].ID != "agent" {
		t.Fatalf("All = %+v", all)
	}
}

func TestMetrics(t *testing.T) {
	tree := health.NewTree()
	tree.Scope("m").NewScope("a").OK("")
	tree.Scope("m").NewScope("b").Degraded("", nil)
	tree.Scope("m").NewScope("c").Degraded("", nil)
	reg := prometheus.NewRegistry()
	reg.MustRegister(tree)
	want := `
# HELP hive_health_scopes Number of health scopes at each level. Scopes that only group others (never reported, with children) are not counted.
# TYPE hive_health_scopes gauge
hive_health_scopes{level="Degraded"} 2
hive_health_scopes{level="OK"} 1
hive_health_scopes{level="Stopped"} 0
hive_health_scopes{level="Unknown"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "hive_health_scopes"); err != nil {
		t.Fatal(err)
	}
}
