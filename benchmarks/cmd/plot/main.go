// Command plot reads a results file of `make bench` (the output of go test
// -bench, benchmarks/results/latest.txt) and writes one SVG line chart per
// scaling series of benchmarks/scaling: cost per object against the number
// of objects, on a logarithmic size axis, one line per implementation.
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
	charts := results.Charts(set)
	if len(charts) == 0 {
		return fmt.Errorf("%s: no scaling results (package %s) to plot", in, results.PkgScaling)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	for _, c := range charts {
		var buf bytes.Buffer
		if err := Render(&buf, c); err != nil {
			return fmt.Errorf("%s: %w", c.File, err)
		}
		path := filepath.Join(outDir, c.File)
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			return err
		}
		fmt.Println("wrote", path)
	}
	return nil
}
