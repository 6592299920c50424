package results

import (
	"fmt"
	"slices"
	"strings"
)

// Import paths of the packages whose benchmarks the targets read.
const (
	module      = "github.com/steadystate/steadystate"
	PkgStatedb  = module + "/statedb"
	PkgCompare  = module + "/benchmarks/statedb"
	PkgScaling  = module + "/benchmarks/scaling"
	PkgRoutes   = module + "/examples/routes"
	PkgIptables = module + "/examples/iptables"
	PkgSysctl   = module + "/examples/sysctl"
	PkgCilium   = module + "/benchmarks/cilium"
	PkgRecon    = module + "/reconciler"
	PkgEtcd     = module + "/etcd"
)

// Ref names one benchmark result.
type Ref struct {
	Pkg, Group, Impl string
}

// Target is one headline goal of the project (the "Done means" of the
// statedb, change-feed, reconciler and example-target issues, and the
// pairs against cilium/statedb). Its figure is a metric of Subject, or
// with a Baseline the ratio of Subject's metric to the Baseline's (with
// Inverse, the Baseline's to Subject's).
type Target struct {
	Name    string
	Subject Ref
	// Metrics are the units the figure may be taken from, in order of
	// preference: the first that Subject (and Baseline) report is used.
	Metrics  []string
	Baseline *Ref
	// Inverse makes the ratio Baseline over Subject: for latencies, so
	// that above 1 the subject is faster.
	Inverse bool
	// AtMost makes Limit an upper bound; otherwise it is a lower bound.
	AtMost bool
	Limit  float64
	// Unit is how the figure is printed after its value ("x" for ratios).
	Unit string
	// MinRuns is the number of runs (-count runs times rounds) that
	// Subject and Baseline must each have, so that the figure is a median;
	// with fewer the target is missing. 0 or 1: any.
	MinRuns int
}

// Goal returns the condition as text, e.g. ">= 1.3x".
func (t Target) Goal() string {
	op := ">="
	if t.AtMost {
		op = "<="
	}
	return fmt.Sprintf("%s %s%s", op, t.format(t.Limit), t.Unit)
}

// format prints a figure of t: ratios with two decimals, others as Format.
func (t Target) format(v float64) string {
	if t.Unit == "x" {
		return fmt.Sprintf("%.2f", v)
	}
	return Format(v)
}

// Targets are the headline targets that `make bench-check` enforces: the
// project's own and those against cilium/statedb.
var Targets = slices.Concat(projectTargets, CiliumTargets())

// projectTargets are the goals set by the project's own issues.
var projectTargets = []Target{
	{
		Name:     "statedb WriteTxn batch=100 vs go-memdb (objects/sec)",
		Subject:  Ref{PkgCompare, "BenchmarkWriteTxn/batch=100", "statedb"},
		Baseline: &Ref{PkgCompare, "BenchmarkWriteTxn/batch=100", "memdb"},
		Metrics:  []string{"objects/sec"}, Limit: 1.3, Unit: "x",
	},
	{
		Name:     "statedb lookup vs go-memdb (objects/sec)",
		Subject:  Ref{PkgCompare, "BenchmarkLookup", "statedb"},
		Baseline: &Ref{PkgCompare, "BenchmarkLookup", "memdb"},
		Metrics:  []string{"objects/sec"}, Limit: 3, Unit: "x",
	},
	{
		Name:     "statedb lookup vs raw iradix Get (objects/sec)",
		Subject:  Ref{PkgCompare, "BenchmarkLookup", "statedb"},
		Baseline: &Ref{PkgCompare, "BenchmarkLookup", "iradix"},
		Metrics:  []string{"objects/sec"}, Limit: 0.8, Unit: "x",
	},
	{
		Name:    "statedb single-object WriteTxn allocations",
		Subject: Ref{PkgCompare, "BenchmarkWriteTxn/batch=1", "statedb"},
		Metrics: []string{"allocs/op"}, AtMost: true, Limit: 11, Unit: " allocs/op",
	},
	{
		Name:    "statedb ReadTxn allocations",
		Subject: Ref{PkgStatedb, "BenchmarkReadTxn", ""},
		Metrics: []string{"allocs/op"}, AtMost: true, Limit: 0, Unit: " allocs/op",
	},
	{
		Name:    "propagation delay p50 (batches of 10 through a Deriver)",
		Subject: Ref{PkgStatedb, "BenchmarkPropagationDelay", ""},
		Metrics: []string{"p50-us"}, AtMost: true, Limit: 20, Unit: " us",
	},
	{
		Name:    "propagation delay p99 (batches of 10 through a Deriver)",
		Subject: Ref{PkgStatedb, "BenchmarkPropagationDelay", ""},
		Metrics: []string{"p99-us"}, AtMost: true, Limit: 150, Unit: " us",
	},
	{
		Name:    "reconciler 1M objects throughput",
		Subject: Ref{PkgScaling, "BenchmarkReconcile/objects=1000000", ""},
		Metrics: []string{"objects/sec"}, Limit: 300_000, Unit: " objects/sec",
	},
	{
		Name:    "reconciler 1M objects heap in use",
		Subject: Ref{PkgScaling, "BenchmarkReconcile/objects=1000000", ""},
		Metrics: []string{"heap-MB"}, AtMost: true, Limit: 300, Unit: " MB",
	},
	{
		Name:     "reconciler cost per object at 1M vs at 10k",
		Subject:  Ref{PkgScaling, "BenchmarkReconcile/objects=1000000", ""},
		Baseline: &Ref{PkgScaling, "BenchmarkReconcile/objects=10000", ""},
		Metrics:  []string{"ns/object"}, AtMost: true, Limit: 1.5, Unit: "x",
	},
	{
		Name:     "reconciler Workers=16 vs Workers=1, target with 1 ms latency (objects/sec)",
		Subject:  Ref{PkgRecon, "BenchmarkWorkers", "workers-16"},
		Baseline: &Ref{PkgRecon, "BenchmarkWorkers", "workers-1"},
		Metrics:  []string{"objects/sec"}, Limit: 10, Unit: "x",
	},
	{
		Name:    "fleet: 100 agents x 10k objects, fleet apply until every agent applied it, p99",
		Subject: Ref{PkgEtcd, "BenchmarkFleet/agents=100/objects=10000", ""},
		Metrics: []string{"p99-apply-ms"}, AtMost: true, Limit: 250, Unit: " ms",
	},
	{
		Name:    "fleet: status writes per agent per second under churn",
		Subject: Ref{PkgEtcd, "BenchmarkFleet/agents=100/objects=10000", ""},
		Metrics: []string{"status-writes/s/agent"}, AtMost: true, Limit: 4, Unit: " writes/s",
	},
	{
		Name:     "routes: 10k routes, reconciler time vs ip -batch",
		Subject:  Ref{PkgRoutes, "BenchmarkApply", "reconciler"},
		Baseline: &Ref{PkgRoutes, "BenchmarkApply", "ip-batch"},
		Metrics:  []string{"sec/10k", "ns/op"}, AtMost: true, Limit: 1.5, Unit: "x",
	},
	{
		Name:    "routes: 10k routes, a route deleted by hand back in the kernel, p99",
		Subject: Ref{PkgRoutes, "BenchmarkRepairDrift", ""},
		Metrics: []string{"p99-ms"}, AtMost: true, Limit: 1000, Unit: " ms",
	},
	{
		Name:    "iptables (nf_tables): 2000 rules, a rule deleted by hand back, p99",
		Subject: Ref{PkgIptables, "BenchmarkRepairDrift", ""},
		Metrics: []string{"p99-ms"}, AtMost: true, Limit: 2000, Unit: " ms",
	},
	{
		// Checked every 5s (the default CheckInterval): repaired within
		// the interval, plus the repair itself.
		Name:    "sysctl: a value changed by hand repaired, p99",
		Subject: Ref{PkgSysctl, "BenchmarkRepairDrift", ""},
		Metrics: []string{"p99-ms"}, AtMost: true, Limit: 5250, Unit: " ms",
	},
	{
		Name:     "iptables: 5k rules, reconciler time vs iptables-restore",
		Subject:  Ref{PkgIptables, "BenchmarkApply5k", "reconciler"},
		Baseline: &Ref{PkgIptables, "BenchmarkApply5k", "iptables-restore"},
		Metrics:  []string{"s/5k-rules", "ns/op"}, AtMost: true, Limit: 1.5, Unit: "x",
	},
}

// ciliumShapes are the paired benchmarks of benchmarks/cilium that the
// targets against cilium read, with whether they report latencies.
var ciliumShapes = []struct {
	group   string
	latency bool
}{
	{"BenchmarkWriteTxn/batch=1", false},
	{"BenchmarkWriteTxn/batch=10", false},
	{"BenchmarkWriteTxn/batch=100", false},
	{"BenchmarkWriteTxn/batch=1000", false},
	{"BenchmarkRandomInsert", false},
	{"BenchmarkRandomLookup", false},
	{"BenchmarkFullIteration", false},
	{"BenchmarkChanges", false},
	{"BenchmarkPropagationDelay", true},
	{"BenchmarkDerive/load=light", true},
	{"BenchmarkDerive/load=heavy", true},
	{"BenchmarkAlternate", false},
	{"BenchmarkReconcile/objects=1000000", false},
	{"BenchmarkLPMInsert/prefixes=1000000", false},
	{"BenchmarkLPMLookup/prefixes=1000000", false},
}

// Against cilium, every figure is a median of at least ciliumMinRuns runs
// and a ratio must be at least ciliumMinRatio; steadystate may keep at most
// maxRetained bytes per transaction.
const (
	ciliumMinRuns  = 3
	ciliumMinRatio = 0.95
	maxRetained    = 16
)

// CiliumTargets are the targets against cilium/statedb: for every paired
// shape, steadystate's throughput over cilium's, and for the latency
// shapes cilium's p50 over steadystate's (both above 1 when steadystate is
// faster), and the memory steadystate keeps per transaction.
func CiliumTargets() []Target {
	var ts []Target
	for _, shape := range ciliumShapes {
		subj := Ref{PkgCilium, shape.group, "steadystate"}
		base := &Ref{PkgCilium, shape.group, "cilium"}
		name := strings.TrimPrefix(shape.group, "Benchmark")
		ts = append(ts, Target{
			Name:    "vs cilium: " + name + " objects/sec (steadystate/cilium)",
			Subject: subj, Baseline: base, Metrics: []string{"objects/sec"},
			Limit: ciliumMinRatio, Unit: "x", MinRuns: ciliumMinRuns,
		})
		if shape.latency {
			ts = append(ts, Target{
				Name:    "vs cilium: " + name + " p50 latency (cilium/steadystate)",
				Subject: subj, Baseline: base, Metrics: []string{"p50-us"}, Inverse: true,
				Limit: ciliumMinRatio, Unit: "x", MinRuns: ciliumMinRuns,
			})
		}
	}
	return append(ts, Target{
		Name:    "vs cilium: Alternate memory kept per transaction (steadystate)",
		Subject: Ref{PkgCilium, "BenchmarkAlternate", "steadystate"},
		Metrics: []string{"retained-B/txn"}, AtMost: true, Limit: maxRetained, Unit: " B/txn",
		MinRuns: ciliumMinRuns,
	})
}

// Status of a target in one run.
type Status int

const (
	// Missing: a benchmark or metric the target needs is not in the run.
	Missing Status = iota
	Met
	Missed
)

func (s Status) String() string {
	switch s {
	case Met:
		return "met"
	case Missed:
		return "MISSED"
	default:
		return "MISSING"
	}
}

// Outcome is a target evaluated against one run.
type Outcome struct {
	Target Target
	Status Status
	// Value is the figure compared with the limit (valid unless Missing).
	Value float64
	// Figures says what Value was computed from, e.g.
	// "1.52x: statedb 1.02M vs memdb 671.2k objects/sec".
	Figures string
}

// Evaluate evaluates every target against s.
func Evaluate(s *Set, targets []Target) []Outcome {
	out := make([]Outcome, len(targets))
	for i, t := range targets {
		out[i] = evaluate(s, t)
	}
	return out
}

func evaluate(s *Set, t Target) Outcome {
	o := Outcome{Target: t, Status: Missing}
	subj := s.Find(t.Subject.Pkg, t.Subject.Group, t.Subject.Impl)
	if subj == nil {
		o.Figures = "not in the run: " + t.Subject.String()
		return o
	}
	var base *Result
	if t.Baseline != nil {
		if base = s.Find(t.Baseline.Pkg, t.Baseline.Group, t.Baseline.Impl); base == nil {
			o.Figures = "not in the run: " + t.Baseline.String()
			return o
		}
	}
	for _, r := range []*Result{subj, base} {
		if r != nil && r.Runs < t.MinRuns {
			o.Figures = fmt.Sprintf("%d run(s) of %s, need %d for a median", r.Runs, refOf(r), t.MinRuns)
			return o
		}
	}
	for _, unit := range t.Metrics {
		sv, ok := subj.Metric(unit)
		if !ok {
			continue
		}
		if base == nil {
			o.Value = sv
			o.Figures = t.format(sv) + t.Unit
		} else {
			bv, ok := base.Metric(unit)
			if !ok || bv == 0 || (t.Inverse && sv == 0) {
				continue
			}
			o.Value = sv / bv
			if t.Inverse {
				o.Value = bv / sv
			}
			o.Figures = fmt.Sprintf("%s%s: %s %s vs %s %s %s", t.format(o.Value), t.Unit,
				t.Subject.label(), Format(sv), t.Baseline.label(), Format(bv), unit)
		}
		o.Status = Missed
		if (t.AtMost && o.Value <= t.Limit) || (!t.AtMost && o.Value >= t.Limit) {
			o.Status = Met
		}
		return o
	}
	o.Figures = fmt.Sprintf("no metric of %v reported", t.Metrics)
	return o
}

// refOf names the benchmark of r.
func refOf(r *Result) Ref { return Ref{r.Pkg, r.Group, r.Impl} }

func (r Ref) String() string {
	s := ShortPkg(r.Pkg) + " " + r.Group
	if r.Impl != "" {
		s += " impl=" + r.Impl
	}
	return s
}

// label names r within its target: its impl, or the last element of its
// group when the subject and baseline differ by group.
func (r Ref) label() string {
	if r.Impl != "" {
		return r.Impl
	}
	return lastElem(r.Group)
}
