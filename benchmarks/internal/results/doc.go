// Package results reads the output of `go test -bench` (the benchstat
// format that `make bench` writes to benchmarks/results/latest.txt) and
// turns it into what the benchmark commands print, plot and publish: the
// project's speed targets evaluated as met or missed, the ratios of
// steadystate against each baseline, the scaling series and the tables of
// BENCHMARKS.md.
//
// It is shared by cmd/ratios (the summary and the -check), cmd/plot (the
// SVG charts) and cmd/report (the generated section of BENCHMARKS.md), so
// that the three always agree on names, figures and targets.
package results
