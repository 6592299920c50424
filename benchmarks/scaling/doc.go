// Package scaling holds the benchmarks that show how steadystate's cost
// grows with the size of a table: statedb insert, lookup and change-feed
// cost per object, and the reconciler's end-to-end throughput and heap in
// use, at 1k, 10k, 100k and 1M objects, with cilium/statedb (and its
// reconciler), go-memdb, the raw go-immutable-radix/v2 tree and a plain Go
// map as baselines where they do the same work; and the propagation delay
// through a derived table under light and heavy write load.
//
// Sub-benchmarks are named Benchmark<Workload>/objects=<N>/impl=<name>, and
// every one reports ns/object and objects/sec, so that cmd/plot can draw
// cost per object against N. With -short (make bench-short) the 1M sizes
// are skipped. A 1M size takes a few seconds per implementation: it runs
// once or twice within the default -benchtime of 1s.
package scaling
