package fleetcell_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/steadystate/steadystate/etcd"
	"github.com/steadystate/steadystate/etcd/etcdtest"
	"github.com/steadystate/steadystate/etcd/fleetcell"
	"github.com/steadystate/steadystate/etcd/fleetcmd"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/hivetest"
	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilercell"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
	"github.com/steadystate/steadystate/reflector/reflectorcell"
	"github.com/steadystate/steadystate/statedb"
	"github.com/steadystate/steadystate/statedb/statedbcell"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
	)
}

// thing is a program's own kind of object: a name and a colour.
type thing struct {
	Name   string            `json:"name"`
	Color  string            `json:"color"`
	Status reconciler.Status `json:"-"`
}

var thingName = statedb.Index[*thing, string]{
	Name:       "name",
	FromObject: func(t *thing) index.KeySet { return index.NewKeySet(index.String(t.Name)) },
	FromKey:    index.String,
	Unique:     true,
}

// decodeThing is the node's decode: JSON, checked, under its own name.
func decodeThing(name string, v []byte) (*thing, error) {
	var t thing
	if err := json.Unmarshal(v, &t); err != nil {
		return nil, err
	}
	if t.Color == "" {
		return nil, fmt.Errorf("thing %s: no color", t.Name)
	}
	if fleetcell.ObjectName(t.Name) != name {
		return nil, fmt.Errorf("stored under %q, named %q", name, t.Name)
	}
	return &t, nil
}

// decodeFile is the operator's decode: a line "NAME COLOR" per thing.
func decodeFile(path string, data []byte) (map[string]map[string][]byte, error) {
	things := map[string][]byte{}
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("%s:%d: want NAME COLOR", path, i+1)
		}
		v, _ := json.Marshal(thing{Name: f[0], Color: f[1]})
		things[fleetcell.ObjectName(f[0])] = v
	}
	return map[string]map[string][]byte{"things": things}, nil
}

// A program with one table of its own, not the agent's kinds, gets fleet
// mode from the cell alone: what `fleet apply` writes reaches its target,
// `fleet status --wait` says its node applied it, and a clean stop leaves
// the fleet.
func TestAProgramOfItsOwn(t *testing.T) {
	cl := etcdtest.StartCluster(t, etcdtest.Binary(t), 1)
	eps := strings.Join(cl.Endpoints(), ",")
	target := reconcilertest.NewTarget(func(t *thing) string { return t.Name })
	program := []cell.Cell{
		statedbcell.Cell,
		reconcilercell.MetricsCell,
		reflectorcell.MetricsCell,
		cell.Module("things", "Things",
			cell.Provide(
				func(db *statedb.DB) (statedb.RWTable[*thing], error) {
					return statedb.NewTable(db, "things", thingName)
				},
				func(p reconcilercell.Params, tbl statedb.RWTable[*thing]) (reconciler.Reconciler[*thing], error) {
					return reconcilercell.Register(p, reconciler.Config[*thing]{
						Name: "things", Table: tbl, Target: target,
						GetObjectStatus: func(t *thing) reconciler.Status { return t.Status },
						SetObjectStatus: func(t *thing, s reconciler.Status) *thing { t.Status = s; return t },
						CloneObject:     func(t *thing) *thing { c := *t; return &c },
					})
				},
				func(tbl statedb.RWTable[*thing], rec reconciler.Reconciler[*thing]) fleetcell.TableOut {
					return fleetcell.Out(fleetcell.Kind[*thing]{
						Table: tbl, Reconciler: rec,
						Equal:     func(a, b *thing) bool { return a.Name == b.Name && a.Color == b.Color },
						SetStatus: func(t *thing, s reconciler.Status) *thing { t.Status = s; return t },
						GetStatus: func(t *thing) reconciler.Status { return t.Status },
						Decode:    decodeThing,
						Name:      func(t *thing) string { return fleetcell.ObjectName(t.Name) },
					})
				},
			),
		),
		fleetcell.ConfigCell,
		cell.When("fleet mode", fleetcell.Config.Enabled, fleetcell.Cell),
	}
	var node *fleetcell.Node
	program = append(program, cell.Invoke(func(n *fleetcell.Node) { node = n }))

	// The desired state, applied by the operator's commands.
	cmds := fleetcmd.Config{Tables: []string{"things"}, Decode: decodeFile, Program: "things"}
	fleet := func(args ...string) (string, error) {
		cmd := fleetcmd.Command(cmds)
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(append(args, "--etcd-endpoints", eps))
		err := cmd.Execute()
		return out.String(), err
	}
	file := filepath.Join(t.TempDir(), "things.txt")
	if err := os.WriteFile(file, []byte("a/1 red\nb green\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := fleet("apply", "-f", file); err != nil || !strings.Contains(out, ": 2 things; in force at revision") {
		t.Fatalf("fleet apply: %v\n%s", err, out)
	}

	hivetest.StartWithOptions(t, hivetest.Options{Flags: []string{"--etcd-endpoints=" + eps, "--node=n1", "--status-ttl=3s"}}, program...)
	if node == nil || node.Name() != "n1" {
		t.Fatalf("the node: %v", node)
	}
	out, err := fleet("status", "--wait", "--timeout", "30s")
	if err != nil || !strings.Contains(out, "applied on 1 of 1 nodes at revision ") {
		t.Fatalf("fleet status --wait: %v\n%s", err, out)
	}
	target.WaitForState(t, map[string]*thing{"a/1": {Name: "a/1", Color: "red"}, "b": {Name: "b", Color: "green"}}, sameThing)
	if st := node.Status(); st.Objects["Done"] != 2 || st.Revision == 0 {
		t.Fatalf("the node's status %+v", st)
	}
	select {
	case <-node.Listed():
	case <-time.After(10 * time.Second):
		t.Fatal("Listed not closed")
	}

	// A change whose delete fails: b is gone from the desired state but
	// not from the target, so the node has not applied it, and says so.
	clear := target.Inject("b", reconcilertest.Fault{})
	if err := os.WriteFile(file, []byte("a/1 blue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := fleet("apply", "-f", file); err != nil {
		t.Fatalf("fleet apply: %v\n%s", err, out)
	}
	if out, err := fleet("status", "--wait", "--timeout", "30s"); err == nil || !strings.Contains(out, "DeleteFailing=1") ||
		!strings.Contains(out, "things: 1 removed objects still in the real system") || !strings.Contains(out, "applied on 0 of 1 nodes") {
		t.Fatalf("fleet status --wait with a delete failing: %v\n%s", err, out)
	}
	clear()
	target.WaitForState(t, map[string]*thing{"a/1": {Name: "a/1", Color: "blue"}}, sameThing)
	// The retried delete changes no table: the node reads its state again
	// within a second while anything fails.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, err := fleet("status")
		if err == nil && strings.Contains(out, "applied on 1 of 1 nodes") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("once the delete went through, fleet status still says: %v\n%s", err, out)
		}
	}

	// A value the node refuses (written past the operator's decode): it
	// keeps the last good one and says so.
	c := cl.Client()
	if _, err := etcd.ApplyTables(t.Context(), c, etcd.Layout{}, etcd.ScopeAll,
		map[string]map[string][]byte{"things": {fleetcell.ObjectName("a/1"): []byte(`{"name":"a/1"}`)}}); err != nil {
		t.Fatal(err)
	}
	if out, err := fleet("status", "--wait", "--timeout", "30s"); err == nil || !strings.Contains(out, "things a/1: rejected: thing a/1: no color") {
		t.Fatalf("fleet status --wait after a bad value: %v\n%s", err, out)
	}
}

func sameThing(a, b *thing) bool { return a.Name == b.Name && a.Color == b.Color }
