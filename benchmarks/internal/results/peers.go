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
	{unit: "B/op", lowerIsBetter: true},
	{unit: "allocs/op", lowerIsBetter: true},
	{unit: "retained-B/txn", absolute: true},
}

// PeerNote states the direction of the ratios of PeerTable.
const PeerNote = "ratio above 1x: steadystate is better. Speeds (objects/sec) are steadystate / peer; " +
	"latencies (p50/p90/p99 us), heap-MB, B/op and allocs/op are peer / steadystate; retained-B/txn has no ratio. " +
	"The figures of each side are medians over the runs (rounds x -count); the ratio is the median of the " +
	"per-round ratios (the sides of a round run back to back), range the lowest and highest of them; " +
	"target: the goal a headline target sets, if any."

// PeerTable compares steadystate with every other implementation of each
// paired benchmark of package pkg (cilium, and cilium-lean where there is
// one): one row per benchmark, peer and metric that both sides report,
// with both medians, the median of the per-round ratios and its range, the
// number of rounds and the target that reads the row.
func PeerTable(s *Set, pkg, title string) (Table, bool) {
	t := Table{
		Title:  fmt.Sprintf("steadystate vs %s: %s", title, ShortPkg(pkg)),
		Note:   PeerNote,
		Header: []string{"benchmark", "peer", "metric", "steadystate", "peer's", "ratio", "range", "rounds", "target"},
	}
	for _, g := range s.Groups(pkg) {
		subj := s.Find(pkg, g, "steadystate")
		if subj == nil {
			continue
		}
		for _, base := range s.InGroup(pkg, g) {
			if base == subj {
				continue
			}
			for _, m := range pairMetrics {
				sv, ok1 := subj.Metric(m.unit)
				bv, ok2 := base.Metric(m.unit)
				if !ok1 || !ok2 {
					continue
				}
				ratio, spread, rounds := "-", "-", strconv.Itoa(min(subj.Runs, base.Runs))
				if mid, lo, hi, n, ok := PairedRatio(subj, base, m.unit, m.lowerIsBetter); ok && !m.absolute {
					ratio = fmt.Sprintf("%.2fx", mid)
					spread = fmt.Sprintf("%.2f-%.2f", lo, hi)
					rounds = strconv.Itoa(n)
				}
				t.Rows = append(t.Rows, []string{g, base.Impl, m.unit, Format(sv), Format(bv), ratio, spread,
					rounds, goalOf(refOf(subj), refOf(base), m.unit)})
			}
		}
	}
	return t, len(t.Rows) > 0
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

// CiliumLabel names the cilium side of a run as "cilium/statedb" and its
// version, which `make bench` records in its header (cilium-statedb:
// v0.9.4), or without a version if the run does not say.
func CiliumLabel(s *Set) string {
	if v := s.Config["cilium-statedb"]; v != "" {
		return "cilium/statedb " + v
	}
	return "cilium/statedb"
}
