// Package cilium holds the benchmarks that pair steadystate with
// cilium/statedb (v0.9.4, its newest release when written; the version is
// the one in go.mod, and `make bench` records it), the in-memory database
// (with its reconciler and hive) whose design steadystate follows. Each
// workload runs on both, in one process, as sub-benchmarks
// impl=steadystate and impl=cilium, so that cmd/ratios can put them side
// by side and check the targets against cilium.
//
// # Pairing
//
// A workload runs in five rounds: Benchmark<Shape>/.../round=<r>/impl=<side>.
// Each round runs the sides back to back, the order rotating by round
// (steadystate first when r is even, cilium first when r is odd), so that
// a burst of noise on the machine (a 2-core box that others use) hits both
// sides alike. (go test -count=N repeats each leaf N times in a row, so
// the sides of a round are then N runs apart.) cmd/ratios drops the round
// element, takes the median of each side over the rounds and -count runs,
// and computes every ratio as the median of the per-round ratios (the
// sides of one round of one repetition paired), which the targets need
// from at least five rounds. Both sides store the same object type and
// allocate their objects the same way in the timed loop.
//
// cilium runs at its best, as its users run it: its default metrics (since
// v0.9 its NopMetrics, as steadystate's default is no metrics), and a
// watch channel asked for only where the benchmark waits on one (since v0.9
// cilium makes channels only for the ...Watch reads, as steadystate does).
//
// # Shapes
//
// The shapes of cilium/statedb's own benchmarks, re-created here:
//
//   - WriteTxn/batch=N: one committed write transaction of N new objects
//     (N = 1, 10, 100, 1000) with IDs 0..N-1, into one table.
//   - WriteTxnMetrics: batch=1 with each side's metrics on (steadystate's
//     Prometheus implementation, cilium's expvar one): cilium's
//     WriteTxn_1_ExpVarMetrics.
//   - WriteTxnSecondary/batch=100, PrefixSecondary, LowerBoundSecondary and
//     ListInsert: cilium's shapes on a non-unique secondary index and its
//     list-then-insert loop (secondary_test.go).
//   - RandomInsert: 1000 new objects in random key order in one committed
//     transaction.
//   - RandomLookup: each of 1000 objects by primary key, in random order,
//     with the queries built beforehand, from one snapshot per op.
//   - FullIteration: All over a table of 100k objects, checking key order.
//   - Changes: 1000 inserts, read through a change iterator, then DeleteAll,
//     and the 1000 deletes read through it.
//   - PropagationDelay: cilium's round trip in one goroutine: commit 10
//     objects to table A, wait for A's watch channel, take a snapshot, take
//     B's AllWatch channel, read A by LowerBound(ByRevision(last revision))
//     with its watch channel, write copies of the objects to B, commit, wait
//     for B's watch channel. Each round is a sample: p50/p90/p99 in
//     microseconds, and objects/sec.
//
// And the shapes of steadystate's own benchmarks:
//
//   - Replace/table=1000/batch=N: WriteTxn/batch=N (1 or 10) into a table
//     that holds 1000 objects, replacing them in turn, as the tables of a
//     node agent are full: every write copies the path to its object in a
//     tree of 1000 and the revision index's.
//   - Derive/load=light: each side's own deriver copies A to B
//     (steadystate: statedb.NewDeriver and Run; cilium: statedb.Derive as a
//     job of a cilium hive) and a reader waits for each batch of 10 to show
//     in B: the latency from the commit to A until the batch is visible in
//     B (p50/p90/p99 microseconds) and objects/sec.
//   - Derive/load=heavy: the same while another writer commits batches of
//     100 objects to A back to back (keys apart from the probe's);
//     load-objects/sec is what it wrote.
//   - Alternate: batches of 10 objects committed to table A, then B, then
//     A, ..., cycling over a fixed set of keys: objects/sec, and
//     retained-B/txn, the growth of the live heap (after a GC) over 20k
//     more such transactions, divided by their number. Live data is the
//     same before and after, so anything above a few bytes is memory that
//     depends on the number of transactions. A shrinking heap is reported
//     as 0.
//   - Reconcile/objects=N: cilium's reconciler benchmark (a program of its
//     own there) as a Go benchmark: insert N pending objects in
//     transactions of 1000 into a table whose reconciler has a no-op
//     target, and wait until the last object is Done (then check that all
//     are). cilium's reconciler is registered in a cilium hive with the
//     round limits of that program (1000 objects, 1000 rounds a second,
//     burst 10), twice: impl=cilium as the program runs it (its default
//     expvar metrics) and impl=cilium-lean with a no-op Metrics;
//     steadystate's is reconciler.New and Run, as in benchmarks/scaling.
//     objects/sec, and heap-MB: HeapInuse after a GC with the table alive.
//   - LPMInsert/prefixes=N and LPMLookup/prefixes=N: a table of routes with
//     a longest-prefix-match index (steadystate's LPMIndex, cilium's
//     NetIPPrefixIndex) of N random IPv4 prefixes (N = 1k, 10k, 100k, 1M),
//     lengths as in an Internet routing table: N inserts into a new table
//     in transactions of 1000, and 1000 lookups by address per op
//     (lpm_test.go).
//
// BenchmarkFloor is no pair: it measures the least a commit can do (a new
// root published with one atomic store, the old root's watch channel
// closed), alone, in PropagationDelay's round trip and waking a reader,
// the yardstick of the report's "against the floor" table (floor_test.go).
//
// With -short (make bench-short) the sizes shrink: 10k objects for
// FullIteration, 100k for Reconcile, 2000 transactions for retained-B/txn,
// 1k and 10k prefixes for the LPM shapes.
package cilium
