package statedbcell

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/job"
	"github.com/steadystate/steadystate/statedb"
)

// Cell provides the hive's *statedb.DB, reporting its metrics (see
// NewPrometheusMetrics) to the hive's Prometheus registry and its problems
// (such as a WriteTxn dropped without Commit or Abort) to the module's
// logger. Include it once per hive.
var Cell = cell.Module("statedb", "In-memory state database",
	cell.Provide(newDB),
)

func newDB(reg prometheus.Registerer, log *slog.Logger) (*statedb.DB, error) {
	m, err := NewPrometheusMetrics(reg)
	if err != nil {
		return nil, err
	}
	return statedb.New(statedb.WithMetrics(m), statedb.WithLogger(log)), nil
}

// TableCell creates a table with statedb.NewTable in the module it is
// placed in. The writable statedb.RWTable[Obj] is provided only inside that
// module (its writers live there); the read-only statedb.Table[Obj] is
// provided to the whole hive. The errors of NewTable fail the hive's
// construction.
func TableCell[Obj any](name string, primary statedb.Indexer[Obj], secondary ...statedb.Indexer[Obj]) cell.Cell {
	return cell.Group(
		cell.ProvidePrivate(func(db *statedb.DB) (statedb.RWTable[Obj], error) {
			return statedb.NewTable(db, name, primary, secondary...)
		}),
		cell.Provide(func(t statedb.RWTable[Obj]) statedb.Table[Obj] { return t.ToTable() }),
	)
}

// DeriveCell keeps the table Out (created in the same module, e.g. with
// TableCell) as a transform of the table In with a statedb.Deriver, run as
// the module's job "derive-<in>-to-<out>". The errors of
// statedb.NewDeriver fail the hive's construction.
func DeriveCell[In, Out any](transform statedb.DeriveTransform[In, Out]) cell.Cell {
	return cell.Invoke(func(db *statedb.DB, in statedb.Table[In], out statedb.RWTable[Out], jobs job.Group) error {
		d, err := statedb.NewDeriver(db, in, out, transform)
		if err != nil {
			return err
		}
		return jobs.Add(job.OneShot("derive-"+in.Name()+"-to-"+out.Name(), func(ctx context.Context, _ cell.Health) error {
			defer d.Close()
			return d.Run(ctx)
		}))
	})
}
