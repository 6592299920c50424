// Package reconcilercell is the glue between the reconciler and the hive
// framework: Register runs a reconciler as a job of a hive module, with its
// health in the module's health tree, and PrometheusMetrics reports the
// reconciler's measurements to Prometheus.
//
// The reconciler package itself imports neither hive nor Prometheus, so a
// program that does not use the framework links neither. A hive program
// includes MetricsCell once and calls Register from an Invoke in the module
// that owns the reconciler's table:
//
//	hive.New(
//		statedbcell.Cell,
//		reconcilercell.MetricsCell,
//		cell.Module("routes", "Reconciles routes",
//			statedbcell.TableCell("routes", routes.PrimaryIndex, routes.StatusIndex),
//			cell.Invoke(func(p reconcilercell.Params, t statedb.RWTable[*routes.Route]) error {
//				_, err := reconcilercell.Register(p, routes.ReconcilerConfig(t, target))
//				return err
//			}),
//		),
//	)
//
// # Metrics
//
// Every metric is labelled with the reconciler's name (Config.Name, label
// "reconciler") and its table's name (label "table"):
//
//	steadystate_reconciler_operations_total{operation, result}              counter: objects handled by target operations
//	steadystate_reconciler_operation_duration_seconds{operation}            histogram: target operations (a batch counts once)
//	steadystate_reconciler_queued_retries                                   gauge: objects waiting to be retried
//	steadystate_reconciler_prune_duration_seconds{result}                   histogram: Target.Prune calls
//	steadystate_reconciler_prune_round_duration_seconds{result}     histogram: prunes (plan, Prune and bookkeeping)
//	steadystate_reconciler_plan_duration_seconds{operation, result}         histogram: plans of Planner targets
//	steadystate_reconciler_drift_repaired_total                             counter: repairs of drift (found by refresh, target report or prune)
//	steadystate_reconciler_drift_reports_total                              counter: reports of possible drift from a DriftTarget
//	steadystate_reconciler_drift_checked_total                              counter: objects checked because of those reports
//	steadystate_reconciler_pruned_total                                     counter: leftovers removed by prunes
//	steadystate_reconciler_skipped_total{operation}                         counter: operations not made, their plan being empty
//	steadystate_reconciler_refresh_queue                                    gauge: Done objects due for a refresh, waiting for the rate
//	steadystate_reconciler_workers_busy                                     gauge: workers running target operations
//	steadystate_reconciler_stuck_operations                                 gauge: abandoned operations that have not returned
//	steadystate_reconciler_objects{status}                                  gauge: objects of the table by status kind
//
// The counters and histograms of Planner targets appear once they have a
// first sample. operation is update, delete, prune or refresh (see
// reconciler.Operation);
// result is ok or error; status is Pending, Refreshing, Done or Error. The
// objects currently failing are steadystate_reconciler_objects{status="Error"}:
// there is no separate gauge of them.
package reconcilercell
