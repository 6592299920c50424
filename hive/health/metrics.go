package health

import (
	"github.com/prometheus/client_golang/prometheus"
)

var scopesDesc = prometheus.NewDesc(
	"steadystate_health_scopes",
	"Health scopes of a module at each level: the module's own scope once it reported, and the scopes of its jobs and components "+
		"(not those of its sub-modules), each at its effective level: the worst of its own and its children's. "+
		"Scopes that only group others (never reported, with children) are not counted. "+
		`Label module is the full module id ("" for scopes outside every module).`,
	[]string{"module", "level"}, nil,
)

// levels are the label values always exported for a module, so a level at
// zero shows.
var levels = []Level{LevelOK, LevelDegraded, LevelStopped, LevelUnknown}

// Describe implements prometheus.Collector.
func (t *Tree) Describe(ch chan<- *prometheus.Desc) { ch <- scopesDesc }

// Collect implements prometheus.Collector: steadystate_health_scopes, one
// gauge per module and level, computed at scrape time. Every module scope
// gets all four levels; module "" (the root) only when scopes outside every
// module exist.
func (t *Tree) Collect(ch chan<- prometheus.Metric) {
	counts, modules := t.countByModule()
	for _, m := range modules {
		for _, l := range levels {
			ch <- prometheus.MustNewConstMetric(scopesDesc, prometheus.GaugeValue, float64(counts[m][l]), m, string(l))
		}
	}
}

// countByModule counts the scopes of each module by their effective level
// (see node.effective), and lists the modules to export in tree order.
func (t *Tree) countByModule() (map[string]map[Level]int, []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	counts := map[string]map[Level]int{}
	var modules []string
	// walk counts n and its descendants and returns n's effective level.
	var walk func(n *node, module string) Level
	walk = func(n *node, module string) Level {
		if n.module && n.parent != nil {
			module = n.moduleID
			modules = append(modules, module)
		}
		levels := make([]Level, 0, len(n.children))
		for _, c := range n.children {
			levels = append(levels, walk(c, module))
		}
		l := n.effective(levels)
		if n.parent != nil && (n.reported || len(n.children) == 0) {
			if counts[module] == nil {
				counts[module] = map[Level]int{}
			}
			counts[module][l]++
		}
		return l
	}
	walk(t.root, "")
	if counts[""] != nil {
		modules = append([]string{""}, modules...)
	}
	return counts, modules
}
