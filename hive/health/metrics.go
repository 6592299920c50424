package health

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/steadystate/steadystate/hive/cell"
)

var scopesDesc = prometheus.NewDesc(
	"hive_health_scopes",
	"Number of health scopes at each level. Scopes that only group others (never reported, with children) are not counted.",
	[]string{"level"}, nil,
)

// levels are the label values always exported, so a level at zero shows.
var levels = []cell.Level{cell.LevelOK, cell.LevelDegraded, cell.LevelStopped, cell.LevelUnknown}

// Describe implements prometheus.Collector.
func (t *Tree) Describe(ch chan<- *prometheus.Desc) { ch <- scopesDesc }

// Collect implements prometheus.Collector: one gauge per level, counting
// scopes by their own level, computed at scrape time.
func (t *Tree) Collect(ch chan<- prometheus.Metric) {
	counts := t.Counts()
	for _, l := range levels {
		ch <- prometheus.MustNewConstMetric(scopesDesc, prometheus.GaugeValue, float64(counts[l]), string(l))
	}
}

// Counts returns the number of scopes at each level, as the
// hive_health_scopes gauge reports them.
func (t *Tree) Counts() map[cell.Level]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	counts := map[cell.Level]int{}
	var walk func(n *node)
	walk = func(n *node) {
		if n.parent != nil && (n.reported || len(n.children) == 0) {
			counts[n.level]++
		}
		for _, c := range n.children {
			walk(c)
		}
	}
	walk(t.root)
	return counts
}
