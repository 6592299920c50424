package reflectorcell_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/health"
	"github.com/steadystate/steadystate/hive/hivetest"
	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reflector"
	"github.com/steadystate/steadystate/reflector/reflectorcell"
	"github.com/steadystate/steadystate/statedb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type obj struct {
	Name   string
	Status reconciler.Status
}

var nameIndex = statedb.Index[*obj, string]{
	Name:       "name",
	FromObject: func(o *obj) index.KeySet { return index.NewKeySet(index.String(o.Name)) },
	FromKey:    index.String,
	Unique:     true,
}

// staticSource lists its names and then has nothing more to say.
type staticSource []string

func (s staticSource) List(context.Context) ([]reflector.Item[string], uint64, error) {
	var items []reflector.Item[string]
	for _, n := range s {
		items = append(items, reflector.Item[string]{Key: n, Value: n})
	}
	return items, 1, nil
}

func (s staticSource) Watch(ctx context.Context, _ uint64) (<-chan reflector.Event[string], error) {
	ch := make(chan reflector.Event[string])
	go func() { <-ctx.Done(); close(ch) }()
	return ch, nil
}

// Register runs the reflector as a job of its module: the table fills and
// is initialized, the health tree has the reflector under the job, and the
// metrics count the initial list.
func TestRegister(t *testing.T) {
	var db *statedb.DB
	var table statedb.RWTable[*obj]
	h := hivetest.Start(t,
		reflectorcell.MetricsCell,
		cell.Module("db", "The state database", cell.Provide(statedb.New)),
		cell.Module("objs", "Desired objects",
			cell.Invoke(func(p reflectorcell.Params) error {
				var err error
				if table, err = statedb.NewTable(p.DB, "objs", nameIndex); err != nil {
					return err
				}
				db = p.DB
				_, err = reflectorcell.Register(p, reflector.Config[string, *obj]{
					Name:   "objs",
					Source: staticSource{"a", "b"},
					Writer: reconciler.DesiredWriter[*obj]{Table: table, Equal: func(a, b *obj) bool { return a.Name == b.Name },
						SetObjectStatus: func(o *obj, s reconciler.Status) *obj { o.Status = s; return o }},
					Transform: func(_ string, v string) (*obj, error) { return &obj{Name: v}, nil },
				})
				return err
			}),
		),
	)
	deadline := time.Now().Add(10 * time.Second)
	for {
		txn := db.ReadTxn()
		ok, _ := table.Initialized(txn)
		scope, found := find(h.Health().Snapshot(), "objs.reflect-objs.reflector")
		if ok && table.NumObjects(txn) == 2 && found && scope.Level == health.LevelOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("table initialized %v with %d objects; reflector scope %+v (found %v)", ok, table.NumObjects(txn), scope, found)
		}
		time.Sleep(5 * time.Millisecond)
	}
	want := `
# HELP steadystate_reflector_relists_total Lists of the source, by reason (initial, watch-lost, resync).
# TYPE steadystate_reflector_relists_total counter
steadystate_reflector_relists_total{reason="initial",reflector="objs"} 1
`
	if err := testutil.GatherAndCompare(h.Registry(), strings.NewReader(want), "steadystate_reflector_relists_total"); err != nil {
		t.Fatal(err)
	}
}

// find returns the scope whose ID ends with suffix.
func find(s health.Status, suffix string) (health.Status, bool) {
	if strings.HasSuffix(s.ID, suffix) {
		return s, true
	}
	for _, c := range s.Children {
		if f, ok := find(c, suffix); ok {
			return f, true
		}
	}
	return health.Status{}, false
}

// tableSource lists its names in two tables, then says nothing more.
type tableSource []string

func (s tableSource) List(context.Context) ([]reflector.Item[string], uint64, error) {
	var items []reflector.Item[string]
	for _, n := range s {
		items = append(items, reflector.Item[string]{Table: "left", Key: n, Value: n}, reflector.Item[string]{Table: "right", Key: n, Value: n})
	}
	return items, 1, nil
}

func (s tableSource) Watch(ctx context.Context, _ uint64) (<-chan reflector.Event[string], error) {
	return staticSource(s).Watch(ctx, 0)
}

// RegisterMulti runs a reflector of two tables as one job: both fill, in
// one commit, and are initialized.
func TestRegisterMulti(t *testing.T) {
	var db *statedb.DB
	var left, right statedb.RWTable[*obj]
	h := hivetest.Start(t,
		reflectorcell.MetricsCell,
		cell.Module("db", "The state database", cell.Provide(statedb.New)),
		cell.Module("objs", "Desired objects",
			cell.Invoke(func(p reflectorcell.Params) error {
				var err error
				if left, err = statedb.NewTable(p.DB, "left", nameIndex); err != nil {
					return err
				}
				if right, err = statedb.NewTable(p.DB, "right", nameIndex); err != nil {
					return err
				}
				db = p.DB
				into := func(name string, t statedb.RWTable[*obj]) reflector.TableSpec[string] {
					return reflector.Into[string, *obj]{Table: name,
						Writer: reconciler.DesiredWriter[*obj]{Table: t, Equal: func(a, b *obj) bool { return a.Name == b.Name },
							SetObjectStatus: func(o *obj, s reconciler.Status) *obj { o.Status = s; return o }},
						Transform: func(_ string, v string) (*obj, error) { return &obj{Name: v}, nil }}
				}
				_, err = reflectorcell.RegisterMulti(p, reflector.MultiConfig[string]{
					Name: "both", Source: tableSource{"a", "b"}, Tables: []reflector.TableSpec[string]{into("left", left), into("right", right)},
				})
				return err
			}),
		),
	)
	deadline := time.Now().Add(10 * time.Second)
	for {
		txn := db.ReadTxn()
		okL, _ := left.Initialized(txn)
		okR, _ := right.Initialized(txn)
		scope, found := find(h.Health().Snapshot(), "objs.reflect-both.reflector")
		if okL && okR && left.NumObjects(txn) == 2 && right.NumObjects(txn) == 2 && found && scope.Level == health.LevelOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tables initialized %v %v with %d and %d objects; reflector scope %+v (found %v)",
				okL, okR, left.NumObjects(txn), right.NumObjects(txn), scope, found)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
