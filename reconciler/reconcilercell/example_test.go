package reconcilercell_test

import (
	"context"
	"fmt"
	"io"
	"iter"
	"log/slog"

	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/health"
	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilercell"
	"github.com/steadystate/steadystate/statedb"
	"github.com/steadystate/steadystate/statedb/statedbcell"
)

// Setting is a desired kernel-like setting; Status is the reconciler's.
type Setting struct {
	Key, Value string
	Status     reconciler.Status
}

func settingStatus(s *Setting) reconciler.Status { return s.Status }

var settingKey = statedb.Index[*Setting, string]{
	Name:       "key",
	FromObject: func(s *Setting) index.KeySet { return index.NewKeySet(index.String(s.Key)) },
	FromKey:    index.String,
	Unique:     true,
}

// settings is the real system: it prints what it is told to do.
type settings struct{}

func (settings) Update(_ context.Context, _ statedb.ReadTxn, s *Setting) error {
	fmt.Printf("set %s=%s\n", s.Key, s.Value)
	return nil
}

func (settings) Delete(_ context.Context, _ statedb.ReadTxn, s *Setting) error {
	fmt.Printf("unset %s\n", s.Key)
	return nil
}

func (settings) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*Setting, statedb.Revision]) error {
	return nil
}

// A reconciler as a job of a hive module: its health is a scope of the
// module's health tree (module → job → reconciler).
func ExampleRegister() {
	var (
		db    *statedb.DB
		table statedb.RWTable[*Setting]
		rec   reconciler.Reconciler[*Setting]
	)
	h := hive.NewWithOptions(hive.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		statedbcell.Cell,
		reconcilercell.MetricsCell,
		cell.Module("settings", "Reconciles settings",
			statedbcell.TableCell("settings", settingKey, reconciler.StatusIndex(settingStatus)),
			cell.Invoke(func(p reconcilercell.Params, t statedb.RWTable[*Setting]) error {
				var err error
				db, table = p.DB, t
				rec, err = reconcilercell.Register(p, reconciler.Config[*Setting]{
					Name:            "settings",
					Table:           t,
					Target:          settings{},
					GetObjectStatus: settingStatus,
					SetObjectStatus: func(s *Setting, st reconciler.Status) *Setting { s.Status = st; return s },
					CloneObject:     func(s *Setting) *Setting { c := *s; return &c },
				})
				return err
			}),
		),
	)
	ctx := context.Background()
	if err := h.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer h.Stop(ctx)

	wtxn := db.WriteTxn(table)
	table.Insert(wtxn, &Setting{Key: "net.ipv4.ip_forward", Value: "1", Status: reconciler.StatusPending()})
	rev := table.Revision(wtxn.Commit())
	if _, err := rec.WaitUntilReconciled(ctx, rev); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(reconciler.CountByStatus(db.ReadTxn(), table, settingStatus, reconciler.StatusKindDone))
	printScopes(h.Health().Snapshot(), "")
	// Output:
	// set net.ipv4.ip_forward=1
	// map[Done:1]
	// hive OK
	//   settings OK
	//     reconcile-settings OK
	//       reconciler OK
}

// printScopes prints the names and levels of the health tree.
func printScopes(s health.Status, indent string) {
	fmt.Println(indent+s.Name, s.Level)
	for _, c := range s.Children {
		printScopes(c, indent+"  ")
	}
}
