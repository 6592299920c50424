package statedb

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/job"
)

// Cell provides the hive's *DB, reporting its metrics to the hive's
// Prometheus registry and its problems to the module's logger.
var Cell = cell.Module("statedb", "In-memory state database",
	cell.Provide(newHiveDB),
)

func newHiveDB(reg prometheus.Registerer, log *slog.Logger) (*DB, error) {
	m, err := NewPrometheusMetrics(reg)
	if err != nil {
		return nil, err
	}
	return New(WithMetrics(m), WithLogger(log)), nil
}

// TableCell creates a table in the module it is placed in. The writable
// RWTable[Obj] is provided only inside that module (its writers live
// there); the read-only Table[Obj] is provided to the whole hive.
func TableCell[Obj any](name string, primary Indexer[Obj], secondary ...Indexer[Obj]) cell.Cell {
	return cell.Group(
		cell.ProvidePrivate(func(db *DB) (RWTable[Obj], error) {
			return NewTable(db, name, primary, secondary...)
		}),
		cell.Provide(func(t RWTable[Obj]) Table[Obj] { return t.ToTable() }),
	)
}

// DeriveCell keeps the table Out (created in the same module, e.g. with
// TableCell) as a transform of the table In, running the Deriver as a job of
// the module.
func DeriveCell[In, Out any](transform DeriveTransform[In, Out]) cell.Cell {
	return cell.Invoke(func(db *DB, in Table[In], out RWTable[Out], jobs job.Group) error {
		d, err := NewDeriver(db, in, out, transform)
		if err != nil {
			return err
		}
		jobs.Add(job.OneShot("derive-"+in.Name()+"-to-"+out.Name(), func(ctx context.Context, _ cell.Health) error {
			return d.Run(ctx)
		}))
		return nil
	})
}
