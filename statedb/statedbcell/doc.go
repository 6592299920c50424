// Package statedbcell is the glue between statedb and the hive framework:
// the hive cells that provide a *statedb.DB and its tables, run Derivers as
// jobs, and the Prometheus implementation of statedb.Metrics.
//
// statedb itself imports neither hive nor Prometheus, so a program that
// does not use the framework links neither. A hive program includes Cell
// once, then TableCell in the module that owns each table:
//
//	hive.New(
//		statedbcell.Cell,
//		cell.Module("routes", "Desired routes",
//			statedbcell.TableCell("routes", routes.PrimaryIndex),
//			cell.Invoke(registerRoutesWriter), // gets statedb.RWTable[*Route]
//		),
//		cell.Module("api", "Status API",
//			cell.Invoke(newAPI), // gets statedb.Table[*Route]: read-only
//		),
//	)
//
// # Metrics
//
// NewPrometheusMetrics registers these metrics, each labelled with the
// table's name (label "table"):
//
//	steadystate_statedb_write_txn_lock_wait_seconds  histogram: wait for a table's write lock
//	steadystate_statedb_write_txn_duration_seconds   histogram: time a table was held by a WriteTxn
//	steadystate_statedb_table_objects                gauge: objects in the table
//	steadystate_statedb_table_revision               gauge: the table's revision
//	steadystate_statedb_table_graveyard_objects      gauge: deleted objects kept for change iterators
//	steadystate_statedb_table_change_iterators       gauge: registered change iterators
package statedbcell
