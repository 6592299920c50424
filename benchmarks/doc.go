// Package benchmarks is the comparison module of steadystate: it measures
// steadystate against its peers (go-memdb, the raw go-immutable-radix/v2
// tree) on the same workloads in the same run. It is a module of its own so
// that the peers stay out of the library's dependency list.
//
// Run it with `make bench` at the repository root; cmd/ratios turns the
// output into a table of objects/sec per implementation and the ratios that
// the project's speed targets are stated in.
package benchmarks
