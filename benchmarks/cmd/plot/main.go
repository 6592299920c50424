// Command plot reads a results file of `make bench` (the output of go test
// -bench, benchmarks/results/latest.txt) and writes one SVG line chart per
// scaling series of benchmarks/scaling: cost per object against the number
// of objects, on a logarithmic size axis, one line per implementation
// (steadystate, cilium/statedb and the other baselines on the same axes);
// and bar charts of the pairs of benchmarks/cilium (the propagation
// delays of both sides).
//
// Usage:
//
//	go run ./cmd/plot -in results/latest.txt -out plots
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/steadystate/steadystate/benchmarks/internal/results"
)

func main() {
	in := flag.String("in", "results/latest.txt", "results file (output of go test -bench)")
	out := flag.String("out", "plots", "directory to write the SVG files to")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "plot:", err)
		os.Exit(1)
	}
}

func run(in, outDir string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	set, err := results.Parse(f, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	charts, bars := results.Charts(set), results.BarCharts(set)
	if len(charts)+len(bars) == 0 {
		return fmt.Errorf("%s: no scaling results (package %s) nor pairs (package %s) to plot", in, results.PkgScaling, results.PkgCilium)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	write := func(file string, render func(*bytes.Buffer) error) error {
		var buf bytes.Buffer
		if err := render(&buf); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		path := filepath.Join(outDir, file)
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			return err
		}
		fmt.Println("wrote", path)
		return nil
	}
	for _, c := range charts {
		if err := write(c.File, func(b *bytes.Buffer) error { return Render(b, c) }); err != nil {
			return err
		}
	}
	for _, c := range bars {
		if err := write(c.File, func(b *bytes.Buffer) error { return RenderBars(b, c) }); err != nil {
			return err
		}
	}
	return nil
}
