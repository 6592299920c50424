// Package statedb holds the benchmarks that compare steadystate's statedb
// with hashicorp/go-memdb and with the raw go-immutable-radix/v2 tree that
// statedb is built on (the floor its design adds cost to).
//
// Every benchmark runs one workload per implementation as sub-benchmarks
// named impl=statedb, impl=memdb and impl=iradix, so that benchstat and
// cmd/ratios can put them side by side, and every one reports objects/sec.
package statedb
