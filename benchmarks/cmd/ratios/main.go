// Command ratios reads the output of `go test -bench` (a results file of
// `make bench`, or stdin) and prints the summary of a run: every result per
// package, the ratios of steadystate against each baseline, every figure
// of the pairs against cilium/statedb, the scaling series, the propagation
// delays and the project's headline targets, each met or missed with its
// figures.
//
// Benchmarks are matched by package and name: sub-benchmarks that differ
// only in their impl=... element are one workload, and those that differ
// only in their round=... element are runs of one benchmark. With -count=N
// (and R rounds) the median of the N (times R) runs is used. Ratios are
// above 1 when steadystate is better: speeds are steadystate over the
// baseline, latencies (the targets marked cilium/steadystate) the
// baseline over steadystate.
//
// It exits with status 1 when the input reports a failure or holds no
// results, and with -check also when a target is missed or cannot be
// evaluated because its benchmark is not in the input.
//
// Usage:
//
//	go run ./cmd/ratios [-in results/latest.txt] [-check] [-echo] [-targets-only]
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/steadystate/steadystate/benchmarks/internal/results"
)

func main() {
	inFile := flag.String("in", "", "results file to read (default: stdin)")
	check := flag.Bool("check", false, "exit with status 1 if a target is missed")
	echo := flag.Bool("echo", false, "copy the input to stdout as it is read")
	targetsOnly := flag.Bool("targets-only", false, "print only the targets")
	flag.Parse()

	var in io.Reader = os.Stdin
	if *inFile != "" {
		f, err := os.Open(*inFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "ratios:", err)
			os.Exit(2)
		}
		defer f.Close()
		in = f
	}
	var echoTo io.Writer
	if *echo {
		echoTo = os.Stdout
	}
	set, err := results.Parse(in, echoTo)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ratios:", err)
		os.Exit(2)
	}
	ok := report(os.Stdout, set, *check, *targetsOnly)
	if !ok {
		os.Exit(1)
	}
}

// report prints the summary and returns false if the input failed or is
// empty, or (with check) if a target was missed.
func report(w io.Writer, set *results.Set, check, targetsOnly bool) bool {
	ok := true
	if t, failed := results.FailedTable(set); failed {
		t.WriteText(w)
		ok = false
	}
	if len(set.Results) == 0 {
		fmt.Fprintln(w, "\nno benchmark results in the input")
		return false
	}
	if !targetsOnly {
		var tables []results.Table
		tables = append(tables, results.MachineTable(set))
		tables = append(tables, results.ResultTables(set)...)
		tables = append(tables, results.RatioTables(set)...)
		if t, found := results.PeerTable(set, results.PkgCilium, results.CiliumLabel(set)); found {
			tables = append(tables, t)
		}
		if t, found := results.FloorTable(set); found {
			tables = append(tables, t)
		}
		tables = append(tables, results.ScalingTables(set)...)
		if t, found := results.ReconcileTable(set); found {
			tables = append(tables, t)
		}
		if t, found := results.PropagationTable(set); found {
			tables = append(tables, t)
		}
		for _, t := range tables {
			t.WriteText(w)
		}
	}
	outcomes := results.Evaluate(set, results.Targets)
	results.TargetsTable(outcomes).WriteText(w)
	missed := 0
	for _, o := range outcomes {
		if o.Status != results.Met {
			missed++
		}
	}
	fmt.Fprintf(w, "\n%d of %d targets met", len(outcomes)-missed, len(outcomes))
	if check && missed > 0 {
		fmt.Fprint(w, "; the check fails")
		ok = false
	}
	fmt.Fprintln(w)
	return ok
}
