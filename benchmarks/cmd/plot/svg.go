package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"

	"github.com/steadystate/steadystate/benchmarks/internal/results"
)

// The chart's geometry, in SVG user units.
const (
	width, height = 760, 440
	left, right   = 80, 210 // the legend sits in the right margin
	top, bottom   = 56, 64
	plotW         = width - left - right
	plotH         = height - top - bottom
)

// palette colours the lines in order; it is distinguishable in grey too.
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"}

// axis maps values to a pixel range, linearly or on a log10 scale.
type axis struct {
	min, max float64
	log      bool
}

// sizeAxis spans whole decades around xs.
func sizeAxis(xs []float64) axis {
	lo, hi := minMax(xs)
	a := axis{min: math.Pow(10, math.Floor(math.Log10(lo))), max: math.Pow(10, math.Ceil(math.Log10(hi))), log: true}
	if a.min == a.max {
		a.min, a.max = a.min/10, a.max*10
	}
	return a
}

// valueAxis is linear from 0 to a round number above ys, unless ys spread
// over more than a factor of 30 (and are all positive): then it is a log10
// axis over whole decades, so that slow and fast implementations both show.
func valueAxis(ys []float64) axis {
	lo, hi := minMax(ys)
	if lo > 0 && hi/lo > 30 {
		return axis{min: math.Pow(10, math.Floor(math.Log10(lo))), max: math.Pow(10, math.Ceil(math.Log10(hi))), log: true}
	}
	if hi <= 0 {
		return axis{min: 0, max: 1}
	}
	step := niceStep(hi / 5)
	return axis{min: 0, max: step * math.Ceil(hi/step)}
}

// frac returns where v lies on a, from 0 (min) to 1 (max).
func (a axis) frac(v float64) float64 {
	if a.log {
		return (math.Log10(v) - math.Log10(a.min)) / (math.Log10(a.max) - math.Log10(a.min))
	}
	return (v - a.min) / (a.max - a.min)
}

// ticks returns the labelled values of a: every decade of a log axis, five
// or so round steps of a linear one.
func (a axis) ticks() []float64 {
	var ts []float64
	if a.log {
		for v := a.min; v <= a.max*1.0001; v *= 10 {
			ts = append(ts, v)
		}
		return ts
	}
	step := niceStep((a.max - a.min) / 5)
	for v := a.min; v <= a.max+step/1000; v += step {
		ts = append(ts, v)
	}
	return ts
}

// niceStep rounds x up to 1, 2 or 5 times a power of ten.
func niceStep(x float64) float64 {
	if x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x*0.9999 {
			return m * p
		}
	}
	return 10 * p
}

func minMax(vs []float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	return lo, hi
}

// Render writes c as a standalone SVG document. A point that cannot be
// placed (a size that is not positive) is an error.
func Render(w io.Writer, c results.Chart) error {
	var xs, ys []float64
	for _, l := range c.Lines {
		for _, p := range l.Points {
			if !(p.X > 0) || math.IsInf(p.X, 0) || math.IsNaN(p.Y) || math.IsInf(p.Y, 0) {
				return fmt.Errorf("line %s: point (%v, %v) cannot be plotted", l.Name, p.X, p.Y)
			}
			xs, ys = append(xs, p.X), append(ys, p.Y)
		}
	}
	if len(xs) == 0 {
		return fmt.Errorf("chart %q has no points", c.Title)
	}
	xa, ya := sizeAxis(xs), valueAxis(ys)
	px := func(v float64) float64 { return left + xa.frac(v)*plotW }
	py := func(v float64) float64 { return top + (1-ya.frac(v))*plotH }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="16" font-weight="bold">%s</text>`+"\n", left, esc(c.Title))
	fmt.Fprintf(&b, `<text x="%d" y="42" fill="#555">%s</text>`+"\n", left, esc(c.Note))

	// Grid and tick labels.
	b.WriteString(`<g stroke="#ddd">` + "\n")
	for _, t := range xa.ticks() {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d"/>`+"\n", px(t), top, px(t), top+plotH)
	}
	for _, t := range ya.ticks() {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f"/>`+"\n", left, py(t), left+plotW, py(t))
	}
	b.WriteString("</g>\n")
	for _, t := range xa.ticks() {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", px(t), top+plotH+18, results.SizeLabel(t))
	}
	for _, t := range ya.ticks() {
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-8, py(t)+4, results.Format(t))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", left, top, plotW, plotH)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">objects in the table (log scale)</text>`+"\n", left+plotW/2, height-18)
	yLabel := c.Metric
	if ya.log {
		yLabel += " (log scale)"
	}
	fmt.Fprintf(&b, `<text transform="translate(18 %d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", top+plotH/2, esc(yLabel))

	// Lines, points (with the figure as a tooltip) and the legend.
	for i, l := range c.Lines {
		color := palette[i%len(palette)]
		pts := make([]string, len(l.Points))
		for j, p := range l.Points {
			pts[j] = fmt.Sprintf("%.1f,%.1f", px(p.X), py(clampY(ya, p.Y)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", color, strings.Join(pts, " "))
		for _, p := range l.Points {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s at %s: %s %s</title></circle>`+"\n",
				px(p.X), py(clampY(ya, p.Y)), color, esc(l.Name), results.SizeLabel(p.X), results.Format(p.Y), esc(c.Metric))
		}
		ly := top + 10 + i*22
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>`+"\n", left+plotW+16, ly, left+plotW+40, ly, color)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", left+plotW+46, ly+4, esc(l.Name))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// clampY keeps a value that a log axis cannot show (0) on its floor.
func clampY(a axis, v float64) float64 {
	if a.log && v < a.min {
		return a.min
	}
	return v
}

func esc(s string) string { return html.EscapeString(s) }

// RenderBars writes c as a standalone SVG document: a group of bars per
// figure, a bar per series, on one value axis from zero (log10 when the
// figures spread over more than a factor of 30).
func RenderBars(w io.Writer, c results.BarChart) error {
	var ys []float64
	for _, ser := range c.Series {
		if len(ser.Values) != len(c.Groups) {
			return fmt.Errorf("series %s has %d values for %d groups", ser.Name, len(ser.Values), len(c.Groups))
		}
		for _, v := range ser.Values {
			if math.IsInf(v, 0) || v < 0 {
				return fmt.Errorf("series %s: value %v cannot be plotted", ser.Name, v)
			}
			if !math.IsNaN(v) {
				ys = append(ys, v)
			}
		}
	}
	if len(ys) == 0 {
		return fmt.Errorf("chart %q has no values", c.Title)
	}
	ya := valueAxis(ys)
	py := func(v float64) float64 { return top + (1-ya.frac(clampY(ya, v)))*plotH }
	groupW := float64(plotW) / float64(len(c.Groups))
	barW := groupW * 0.8 / float64(len(c.Series))

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="16" font-weight="bold">%s</text>`+"\n", left, esc(c.Title))
	fmt.Fprintf(&b, `<text x="%d" y="42" fill="#555">%s</text>`+"\n", left, esc(c.Note))
	b.WriteString(`<g stroke="#ddd">` + "\n")
	for _, t := range ya.ticks() {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f"/>`+"\n", left, py(t), left+plotW, py(t))
	}
	b.WriteString("</g>\n")
	for _, t := range ya.ticks() {
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-8, py(t)+4, results.Format(t))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", left, top, plotW, plotH)
	yLabel := c.Metric
	if ya.log {
		yLabel += " (log scale)"
	}
	fmt.Fprintf(&b, `<text transform="translate(18 %d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", top+plotH/2, esc(yLabel))
	for g, label := range c.Groups {
		x := float64(left) + groupW*(float64(g)+0.5)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x, top+plotH+18, esc(label))
	}
	floor := py(ya.min)
	for i, ser := range c.Series {
		color := palette[i%len(palette)]
		for g, v := range ser.Values {
			if math.IsNaN(v) {
				continue
			}
			x := float64(left) + groupW*float64(g) + groupW*0.1 + barW*float64(i)
			y := py(v)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s, %s: %s %s</title></rect>`+"\n",
				x, y, barW, floor-y, color, esc(ser.Name), esc(c.Groups[g]), results.Format(v), esc(c.Metric))
		}
		ly := top + 10 + i*22
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="24" height="10" fill="%s"/>`+"\n", left+plotW+16, ly-5, color)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", left+plotW+46, ly+4, esc(ser.Name))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
