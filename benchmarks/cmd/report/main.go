// Command report regenerates the results section of BENCHMARKS.md from a
// results file of `make bench`: the machine and run, the headline targets
// (met or missed, with their figures), the scaling tables with their
// charts, the reconciler and propagation tables, every figure of the pairs
// against cilium/statedb with its ratio, the ratios against every baseline
// and every result. It replaces what lies between the begin and
// end markers and leaves the rest of the document, written by hand, alone.
//
// Usage:
//
//	go run ./cmd/report -in results/latest.txt -doc ../BENCHMARKS.md -plots benchmarks/plots
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/steadystate/steadystate/benchmarks/internal/results"
)

// The markers around the generated section.
const (
	beginMarker = "<!-- BEGIN GENERATED RESULTS: do not edit, run `make bench-report` -->"
	endMarker   = "<!-- END GENERATED RESULTS -->"
)

func main() {
	in := flag.String("in", "results/latest.txt", "results file (output of go test -bench)")
	doc := flag.String("doc", "../BENCHMARKS.md", "document whose generated section is replaced")
	plots := flag.String("plots", "benchmarks/plots", "directory of the SVG charts, relative to the document")
	flag.Parse()
	if err := run(*in, *doc, *plots); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func run(in, doc, plots string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	set, err := results.Parse(f, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if len(set.Results) == 0 {
		return fmt.Errorf("%s: no benchmark results", in)
	}
	old, err := os.ReadFile(doc)
	if err != nil {
		return err
	}
	updated, err := replaceSection(string(old), section(set, plots))
	if err != nil {
		return fmt.Errorf("%s: %w", doc, err)
	}
	if err := os.WriteFile(doc, []byte(updated), 0o644); err != nil {
		return err
	}
	fmt.Println("updated", doc)
	return nil
}

// section renders the generated section of set.
func section(set *results.Set, plots string) string {
	var b bytes.Buffer
	results.MachineTable(set).WriteMarkdown(&b)
	if t, failed := results.FailedTable(set); failed {
		b.WriteString("**The run reported failures; the figures below are incomplete.**\n\n")
		t.WriteMarkdown(&b)
	}

	outcomes := results.Evaluate(set, results.Targets)
	met := 0
	for _, o := range outcomes {
		if o.Status == results.Met {
			met++
		}
	}
	t := results.TargetsTable(outcomes)
	t.Note = fmt.Sprintf("**%d of %d headline targets met.**", met, len(outcomes))
	t.WriteMarkdown(&b)

	b.WriteString("### Scaling\n\n")
	charts := results.Charts(set)
	for i, t := range results.ScalingTables(set) {
		t.WriteMarkdown(&b)
		fmt.Fprintf(&b, "![%s](%s)\n\n", charts[i].Title, path.Join(plots, charts[i].File))
	}
	if t, ok := results.ReconcileTable(set); ok {
		t.WriteMarkdown(&b)
	}
	if t, ok := results.PropagationTable(set); ok {
		b.WriteString("### Propagation delay\n\n")
		t.WriteMarkdown(&b)
	}
	for _, c := range results.BarCharts(set) {
		fmt.Fprintf(&b, "![%s](%s)\n\n", c.Title, path.Join(plots, c.File))
	}

	if t, ok := results.PeerTable(set, results.PkgCilium, results.CiliumLabel(set)); ok {
		b.WriteString("### Against cilium/statedb\n\n")
		t.WriteMarkdown(&b)
	}
	if t, ok := results.FloorTable(set); ok {
		b.WriteString("### Against the floor\n\n")
		t.WriteMarkdown(&b)
	}

	b.WriteString("### Ratios against each baseline\n\n")
	for _, t := range results.RatioTables(set) {
		t.WriteMarkdown(&b)
	}

	b.WriteString("### Every result\n\n<details><summary>every benchmark of the run, per package</summary>\n\n")
	for _, t := range results.ResultTables(set) {
		t.WriteMarkdown(&b)
	}
	b.WriteString("</details>\n")
	return b.String()
}

// replaceSection returns doc with what lies between the markers replaced
// by section.
func replaceSection(doc, section string) (string, error) {
	before, rest, ok := strings.Cut(doc, beginMarker)
	if !ok {
		return "", errors.New("no begin marker " + beginMarker)
	}
	_, after, ok := strings.Cut(rest, endMarker)
	if !ok {
		return "", errors.New("no end marker " + endMarker + " after the begin marker")
	}
	return before + beginMarker + "\n\n" + strings.TrimSpace(section) + "\n\n" + endMarker + after, nil
}
