package results

import (
	"bufio"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Result is one benchmark of one implementation in one package, over every
// run of it in the input (go test -count=N prints it N times).
type Result struct {
	// Pkg is the import path of the package the benchmark ran in (from the
	// "pkg:" line go test prints before its results), or "" if none was
	// printed.
	Pkg string
	// Group is the benchmark name without the impl=... and round=...
	// elements and the GOMAXPROCS suffix, e.g.
	// "BenchmarkWriteTxn/batch=100". Results of different implementations
	// of one workload share it; the rounds of one implementation are runs
	// of one Result.
	Group string
	// Impl is the value of the impl=... element, or "" when there is none.
	Impl string
	// Runs is how many result lines were read: -count runs times rounds.
	Runs int
	// Metrics maps a unit ("ns/op", "objects/sec", "allocs/op", "B/op") to
	// its median over the runs.
	Metrics map[string]float64

	samples map[string][]float64
	// runs are the runs in input order, each keyed by its round (see
	// runKey), so that PairedRatio can compare two implementations round
	// by round.
	runs []run
}

// run is one result line of a Result.
type run struct {
	key     string
	metrics map[string]float64
}

// Metric returns the median of unit over the runs, and whether any run
// reported it.
func (r *Result) Metric(unit string) (float64, bool) {
	v, ok := r.Metrics[unit]
	return v, ok
}

// Units returns the units r reports, sorted.
func (r *Result) Units() []string {
	units := make([]string, 0, len(r.Metrics))
	for u := range r.Metrics {
		units = append(units, u)
	}
	slices.Sort(units)
	return units
}

// Set is what Parse read: the benchmark results in the order they first
// appeared, the configuration lines, and the lines that report a failure.
type Set struct {
	Results []*Result
	// Config holds the first value of each "key: value" configuration line
	// (goos, goarch, cpu, and what `make bench` adds: date, go-version,
	// cores, cpu-model, ...), except pkg, which is per result.
	Config map[string]string
	Failed []string
}

// Find returns the result of impl in group of package pkg ("" matches any
// package), or nil.
func (s *Set) Find(pkg, group, impl string) *Result {
	for _, r := range s.Results {
		if r.Group == group && r.Impl == impl && (pkg == "" || r.Pkg == pkg) {
			return r
		}
	}
	return nil
}

// Packages returns the distinct packages in order of first appearance.
func (s *Set) Packages() []string {
	var ps []string
	for _, r := range s.Results {
		if !slices.Contains(ps, r.Pkg) {
			ps = append(ps, r.Pkg)
		}
	}
	return ps
}

// Groups returns the distinct groups of package pkg in order of first
// appearance.
func (s *Set) Groups(pkg string) []string {
	var gs []string
	for _, r := range s.Results {
		if r.Pkg == pkg && !slices.Contains(gs, r.Group) {
			gs = append(gs, r.Group)
		}
	}
	return gs
}

// InGroup returns the results of group in package pkg, in order of first
// appearance.
func (s *Set) InGroup(pkg, group string) []*Result {
	var rs []*Result
	for _, r := range s.Results {
		if r.Pkg == pkg && r.Group == group {
			rs = append(rs, r)
		}
	}
	return rs
}

var (
	procsSuffix = regexp.MustCompile(`-[0-9]+$`)
	// configLine is benchstat's "key: value" line: the key starts with a
	// lower-case letter and holds no space or upper-case letter.
	configLine = regexp.MustCompile(`^([a-z][^\sA-Z:]*):\s*(.*)$`)
)

// failure reports whether line is how go test says that something failed:
// a failed test, benchmark or package (including one that did not build), or
// a panic.
func failure(line string) bool {
	return strings.HasPrefix(line, "FAIL") ||
		strings.HasPrefix(line, "--- FAIL") ||
		strings.HasPrefix(line, "panic: ")
}

// Parse reads the output of go test -bench, of one or several packages and
// runs. Lines that are neither results nor configuration are skipped; lines
// that report a failure are collected in Set.Failed. If echo is not nil,
// every line read is copied to it as it arrives (so a long run shows its
// progress). The only errors are those of reading and echoing.
func Parse(r io.Reader, echo io.Writer) (*Set, error) {
	s := &Set{Config: map[string]string{}}
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if echo != nil {
			if _, err := io.WriteString(echo, line+"\n"); err != nil {
				return nil, err
			}
		}
		if failure(line) {
			s.Failed = append(s.Failed, line)
			continue
		}
		if m := configLine.FindStringSubmatch(line); m != nil {
			key, value := m[1], strings.TrimSpace(m[2])
			if key == "pkg" {
				pkg = value
			} else if _, seen := s.Config[key]; !seen {
				s.Config[key] = value
			}
			continue
		}
		name, metrics, ok := parseLine(line)
		if !ok {
			continue
		}
		group, impl, round := splitName(name)
		res := s.Find(pkg, group, impl)
		if res == nil || res.Pkg != pkg {
			res = &Result{Pkg: pkg, Group: group, Impl: impl, Metrics: map[string]float64{}, samples: map[string][]float64{}}
			s.Results = append(s.Results, res)
		}
		res.Runs++
		for unit, v := range metrics {
			res.samples[unit] = append(res.samples[unit], v)
		}
		res.runs = append(res.runs, run{key: res.runKey(round), metrics: metrics})
	}
	for _, res := range s.Results {
		for unit, vs := range res.samples {
			res.Metrics[unit] = median(vs)
		}
	}
	return s, sc.Err()
}

// parseLine parses one result line:
//
//	BenchmarkName-2   1000   1234 ns/op   5678 objects/sec   12 allocs/op
//
// It returns the name with its GOMAXPROCS suffix removed.
func parseLine(line string) (name string, metrics map[string]float64, ok bool) {
	f := strings.Fields(line)
	if len(f) < 4 || len(f)%2 != 0 || !strings.HasPrefix(f[0], "Benchmark") {
		return "", nil, false
	}
	if n, err := strconv.ParseUint(f[1], 10, 64); err != nil || n == 0 {
		return "", nil, false
	}
	metrics = make(map[string]float64, (len(f)-2)/2)
	for i := 2; i < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return "", nil, false
		}
		metrics[f[i+1]] = v
	}
	return procsSuffix.ReplaceAllString(f[0], ""), metrics, true
}

// runKey names the next run of r in round: the round and how many runs of
// r in that round came before it. Two implementations of a workload that
// run in the same rounds (a paired benchmark, each round run once per
// -count) get the same keys in the same order, so a key pairs the sides of
// one round of one repetition.
func (r *Result) runKey(round string) string {
	n := 0
	for _, ru := range r.runs {
		if k, _, _ := strings.Cut(ru.key, "#"); k == round {
			n++
		}
	}
	return round + "#" + strconv.Itoa(n)
}

// splitName splits "BenchmarkX/batch=1/round=2/impl=memdb" into the group
// "BenchmarkX/batch=1", the impl "memdb" and the round "2" ("" when there
// is none). The round element (the rounds of a paired benchmark, which
// rotate the order of its sides) is dropped from the group, so that every
// round is a run of the same result.
func splitName(name string) (group, impl, round string) {
	parts := strings.Split(name, "/")
	kept := parts[:0]
	for _, p := range parts {
		if v, ok := strings.CutPrefix(p, "impl="); ok && impl == "" {
			impl = v
			continue
		}
		if isRound(p) {
			round = strings.TrimPrefix(p, "round=")
			continue
		}
		kept = append(kept, p)
	}
	return strings.Join(kept, "/"), impl, round
}

// PairedRatio compares subject with baseline run by run: over the runs of
// the two that share a key (the same round of the same repetition), the
// median of subject's unit over baseline's (with inverse, baseline's over
// subject's), with the smallest and largest of those ratios and how many
// there were. ok is false when no run pairs up with a non-zero
// denominator.
func PairedRatio(subject, baseline *Result, unit string, inverse bool) (mid, lo, hi float64, n int, ok bool) {
	var ratios []float64
	for _, sr := range subject.runs {
		sv, ok1 := sr.metrics[unit]
		if !ok1 {
			continue
		}
		for _, br := range baseline.runs {
			if br.key != sr.key {
				continue
			}
			bv, ok2 := br.metrics[unit]
			num, den := sv, bv
			if inverse {
				num, den = bv, sv
			}
			if ok2 && den != 0 {
				ratios = append(ratios, num/den)
			}
			break
		}
	}
	if len(ratios) == 0 {
		return 0, 0, 0, 0, false
	}
	return median(ratios), slices.Min(ratios), slices.Max(ratios), len(ratios), true
}

// isRound reports whether a name element is round=<n>.
func isRound(elem string) bool {
	v, ok := strings.CutPrefix(elem, "round=")
	if !ok || v == "" {
		return false
	}
	_, err := strconv.ParseUint(v, 10, 32)
	return err == nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
