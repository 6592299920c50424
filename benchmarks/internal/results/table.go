package results

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// Table is one table of the summary. The same value is rendered as text by
// cmd/ratios and as Markdown by cmd/report.
type Table struct {
	Title  string
	Note   string // one line under the title, may be ""
	Header []string
	Rows   [][]string
}

// WriteText renders t for a terminal.
func (t Table) WriteText(w io.Writer) error {
	var b strings.Builder
	b.WriteString("\n" + t.Title + "\n")
	if t.Note != "" {
		b.WriteString(t.Note + "\n")
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, row := range append([][]string{t.Header}, t.Rows...) {
		fmt.Fprintln(tw, "  "+strings.Join(row, "\t")+"\t")
	}
	tw.Flush()
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteMarkdown renders t as a Markdown table under a level-4 heading.
// Columns after the first are right-aligned: they hold figures.
func (t Table) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "#### %s\n\n", t.Title)
	if t.Note != "" {
		b.WriteString(t.Note + "\n\n")
	}
	b.WriteString("| " + strings.Join(mdCells(t.Header), " | ") + " |\n|")
	for i := range t.Header {
		if i == 0 {
			b.WriteString(" :--- |")
		} else {
			b.WriteString(" ---: |")
		}
	}
	b.WriteString("\n")
	for _, row := range t.Rows {
		b.WriteString("| " + strings.Join(mdCells(row), " | ") + " |\n")
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// mdCells escapes what would break a table cell.
func mdCells(cells []string) []string {
	out := make([]string, len(cells))
	for i, c := range cells {
		out[i] = strings.ReplaceAll(c, "|", `\|`)
	}
	return out
}

// Format prints a figure with 3 to 4 significant digits, large ones with an
// SI suffix: 0.0787, 3.47, 19.3, 979.6k, 1.26M.
func Format(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e9:
		return fmt.Sprintf("%.2fG", v/1e9)
	case a >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	case a >= 100 || v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

// ShortPkg drops the module path from an import path of the project:
// "github.com/steadystate/steadystate/benchmarks/statedb" is
// "benchmarks/statedb".
func ShortPkg(pkg string) string {
	if pkg == module {
		return "."
	}
	if s, ok := strings.CutPrefix(pkg, module+"/"); ok {
		return s
	}
	return pkg
}

func lastElem(group string) string {
	return group[strings.LastIndex(group, "/")+1:]
}
