// Package benchmarks is the comparison module of steadystate: it measures
// steadystate against its peers (cilium/statedb, go-memdb, the raw
// go-immutable-radix/v2 tree, a plain Go map) on the same workloads in the
// same run. It is a module of its own so that the peers stay out of the
// library's dependency list.
//
//   - statedb: statedb against go-memdb and raw iradix on a table of 1000.
//   - scaling: insert, lookup, change-feed and reconciler cost per object at
//     1k, 10k, 100k and 1M objects; propagation delay under light and heavy
//     write load.
//   - cilium: steadystate paired with cilium/statedb (its database, deriver
//     and reconciler, in a cilium hive) on the shapes of cilium's own
//     benchmarks and of steadystate's, in rounds that alternate the order
//     of the two sides.
//   - cmd/ratios: the summary of a run and the check of the headline targets.
//   - cmd/plot: SVG charts of cost per object against table size.
//   - cmd/report: the generated tables of BENCHMARKS.md.
//   - internal/results: the parser of `go test -bench` output and the
//     targets, tables and charts the commands share.
//
// Run it with `make bench` at the repository root (see BENCHMARKS.md).
package benchmarks
