// Command ratios reads the output of `go test -bench` of the comparison
// benchmarks from stdin and prints, per benchmark, the objects/sec, ns/op and
// allocs/op of each implementation and the ratios statedb/memdb and
// statedb/iradix of objects/sec (above 1: statedb is faster).
//
// Benchmarks are matched by name: sub-benchmarks that differ only in their
// impl=... element are one workload. With -count=N the median of the N runs
// is used.
//
// With -check it exits with status 1 when a target is missed (or cannot be
// checked because its benchmarks are missing); see targets. It always exits
// with status 1 when the input reports a failure or holds no results.
//
// Usage:
//
//	go test -run '^$' -bench . -benchmem ./... | go run ./cmd/ratios [-check] [-echo]
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
)

// The implementation every ratio is about, and its baselines.
const subject = "statedb"

var baselines = []string{"memdb", "iradix"}

// target is one speed goal of the project (issue 2, "Done means").
type target struct {
	Group string
	// Ratio goals: objects/sec of subject divided by that of Baseline must
	// be at least MinRatio.
	Baseline string
	MinRatio float64
	// Allocation goals (when Baseline is ""): allocs/op of subject must be
	// at most MaxAllocs.
	MaxAllocs float64
}

func (t target) String() string {
	if t.Baseline == "" {
		return fmt.Sprintf("%s %s allocs/op <= %g", t.Group, subject, t.MaxAllocs)
	}
	return fmt.Sprintf("%s %s/%s >= %.2fx", t.Group, subject, t.Baseline, t.MinRatio)
}

var targets = []target{
	{Group: "BenchmarkWriteTxn/batch=100", Baseline: "memdb", MinRatio: 1.3},
	{Group: "BenchmarkLookup", Baseline: "memdb", MinRatio: 3},
	{Group: "BenchmarkLookup", Baseline: "iradix", MinRatio: 0.8},
	{Group: "BenchmarkWriteTxn/batch=1", MaxAllocs: 10},
}

func main() {
	check := flag.Bool("check", false, "exit with status 1 if a target is missed")
	echo := flag.Bool("echo", false, "copy the input to stdout as it is read")
	flag.Parse()
	var echoTo io.Writer
	if *echo {
		echoTo = os.Stdout
	}
	in, err := Parse(os.Stdin, echoTo)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ratios:", err)
		os.Exit(2)
	}
	ok := report(os.Stdout, in, *check)
	if !ok {
		os.Exit(1)
	}
}

// report prints the tables and returns false if the input failed or is
// empty, or (with check) if a target was missed.
func report(w io.Writer, in *Input, check bool) bool {
	ok := true
	if len(in.Failed) > 0 {
		fmt.Fprintln(w, "\nthe benchmark run failed:")
		for _, l := range in.Failed {
			fmt.Fprintln(w, "  "+l)
		}
		ok = false
	}
	if len(in.Results) == 0 {
		fmt.Fprintln(w, "\nno benchmark results in the input")
		return false
	}

	fmt.Fprintln(w, "\nresults (median of runs)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "benchmark\timpl\tobjects/sec\tns/op\tallocs/op\truns\t")
	for _, r := range in.Results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t\n", r.Group, r.Impl,
			metric(r, "objects/sec", "%.0f"), metric(r, "ns/op", "%.1f"), metric(r, "allocs/op", "%.0f"), r.Runs)
	}
	tw.Flush()

	fmt.Fprintf(w, "\nratios of objects/sec (%s / baseline; above 1: %s is faster)\n", subject, subject)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "benchmark\t")
	for _, b := range baselines {
		fmt.Fprintf(tw, "%s/%s\t", subject, b)
	}
	fmt.Fprintln(tw)
	for _, g := range in.Groups() {
		if in.Find(g, subject) == nil {
			continue
		}
		fmt.Fprintf(tw, "%s\t", g)
		for _, b := range baselines {
			if r, found := ratio(in, g, b); found {
				fmt.Fprintf(tw, "%.2fx\t", r)
			} else {
				fmt.Fprint(tw, "-\t")
			}
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()

	fmt.Fprintln(w, "\ntargets")
	missed := 0
	for _, t := range targets {
		got, met, found := evaluate(in, t)
		switch {
		case !found:
			missed++
			fmt.Fprintf(w, "  MISSING  %s: benchmark not in the input\n", t)
		case !met:
			missed++
			fmt.Fprintf(w, "  MISSED   %s: %s\n", t, got)
		default:
			fmt.Fprintf(w, "  ok       %s: %s\n", t, got)
		}
	}
	if check && missed > 0 {
		fmt.Fprintf(w, "\n%d of %d targets missed\n", missed, len(targets))
		ok = false
	}
	return ok
}

// ratio returns objects/sec of subject over that of baseline in group.
func ratio(in *Input, group, baseline string) (float64, bool) {
	s, b := in.Find(group, subject), in.Find(group, baseline)
	if s == nil || b == nil {
		return 0, false
	}
	sv, ok1 := s.Metric("objects/sec")
	bv, ok2 := b.Metric("objects/sec")
	if !ok1 || !ok2 || bv == 0 {
		return 0, false
	}
	return sv / bv, true
}

// evaluate returns the measured value of t as text, whether it meets t,
// and whether it could be measured at all.
func evaluate(in *Input, t target) (got string, met, found bool) {
	if t.Baseline == "" {
		r := in.Find(t.Group, subject)
		if r == nil {
			return "", false, false
		}
		a, ok := r.Metric("allocs/op")
		if !ok {
			return "", false, false
		}
		return fmt.Sprintf("%.0f allocs/op", a), a <= t.MaxAllocs, true
	}
	r, ok := ratio(in, t.Group, t.Baseline)
	if !ok {
		return "", false, false
	}
	return fmt.Sprintf("%.2fx", r), r >= t.MinRatio, true
}

func metric(r *Result, unit, format string) string {
	v, ok := r.Metric(unit)
	if !ok {
		return "-"
	}
	return fmt.Sprintf(format, v)
}
