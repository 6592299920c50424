package results

import (
	"fmt"
	"strconv"
)

// A paired benchmark (benchmarks/cilium) runs one workload on steadystate
// (impl=steadystate) and on a peer database (impl=cilium) in rounds that
// alternate their order; its figures are medians over the rounds and runs.

// pairMetric is a metric that PeerTable compares.
type pairMetric struct {
	unit string
	// lowerIsBetter: a time or a size, whose ratio is peer over
	// steadystate; otherwise a speed, steadystate over peer.
	lowerIsBetter bool
	// absolute: shown without a ratio (retained bytes, where both sides
	// are near zero and a ratio says nothing).
	absolute bool
}

// pairMetrics are the metrics of a pair, in the order of the table.
var pairMetrics = []pairMetric{
	{unit: "objects/sec"},
	{unit: "load-objects/sec"},
	{unit: "p50-us", lowerIsBetter: true},
	{unit: "p90-us", lowerIsBetter: true},
	{unit: "p99-us", lowerIsBetter: true},
	{unit: "heap-MB", lowerIsBetter: true},
	{unit: "retained-B/txn", absolute: true},
}

// PeerNote states the direction of the ratios of PeerTable.
const PeerNote = "ratio above 1x: steadystate is better. Speeds (objects/sec) are steadystate / peer; " +
	"latencies (p50/p90/p99 us) and heap-MB are peer / steadystate; retained-B/txn has no ratio. " +
	"Figures are medians over the runs (rounds x -count); target: the goal a headline target sets, if any."

// PeerTable compares steadystate with peer on every paired benchmark of
// package pkg: one row per benchmark and metric that both sides report,
// with both medians, the ratio, the number of runs and the target that
// reads the row.
func PeerTable(s *Set, pkg, peer string) (Table, bool) {
	t := Table{
		Title:  fmt.Sprintf("steadystate vs %s: %s", peer, ShortPkg(pkg)),
		Note:   PeerNote,
		Header: []string{"benchmark", "metric", "steadystate", peer, "ratio", "runs", "target"},
	}
	for _, g := range s.Groups(pkg) {
		subj, base := s.Find(pkg, g, "steadystate"), s.Find(pkg, g, peer)
		if subj == nil || base == nil {
			continue
		}
		for _, m := range pairMetrics {
			sv, ok1 := subj.Metric(m.unit)
			bv, ok2 := base.Metric(m.unit)
			if !ok1 || !ok2 {
				continue
			}
			t.Rows = append(t.Rows, []string{g, m.unit, Format(sv), Format(bv), m.ratio(sv, bv),
				strconv.Itoa(min(subj.Runs, base.Runs)), goalOf(refOf(subj), refOf(base), m.unit)})
		}
	}
	return t, len(t.Rows) > 0
}

// ratio prints the ratio of a steadystate figure sv to a peer's bv, so
// that above 1 steadystate is better, or "-".
func (m pairMetric) ratio(sv, bv float64) string {
	num, den := sv, bv
	if m.lowerIsBetter {
		num, den = bv, sv
	}
	if m.absolute || den == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", num/den)
}

// goalOf returns the goal of the target on subject (against baseline) in
// unit, or "-" if no target reads it.
func goalOf(subject, baseline Ref, unit string) string {
	for _, t := range Targets {
		if t.Subject != subject || len(t.Metrics) == 0 || t.Metrics[0] != unit {
			continue
		}
		if t.Baseline == nil || *t.Baseline == baseline {
			return t.Goal()
		}
	}
	return "-"
}
