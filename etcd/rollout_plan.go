package etcd

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// StepSize is one step of a rollout: the nodes it reaches in all, as a
// count or as a percentage of the live nodes at the start of the rollout.
type StepSize struct {
	Count   int // nodes in all (when Percent is 0)
	Percent int // 1 to 100
}

// String is the step as ParseSteps reads it: "3" or "10%".
func (s StepSize) String() string {
	if s.Percent > 0 {
		return strconv.Itoa(s.Percent) + "%"
	}
	return strconv.Itoa(s.Count)
}

// Nodes is how many of n nodes the step reaches in all: its count, or
// ceil(Percent × n / 100).
func (s StepSize) Nodes(n int) int {
	if s.Percent > 0 {
		return (s.Percent*n + 99) / 100
	}
	return s.Count
}

// ParseSteps reads a rollout's steps: a comma list of node counts and
// percentages (whole numbers) that ends in 100%, e.g. "1,10%,50%,100%".
// A count below 1, a percentage outside 1 to 100, a 100% before the last
// step, or percentages that shrink are errors naming the step.
func ParseSteps(s string) ([]StepSize, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("no steps: give a comma list of node counts and percentages ending in 100% (e.g. 1,10%,50%,100%)")
	}
	var steps []StepSize
	for i, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		var st StepSize
		digits, percent := strings.CutSuffix(f, "%")
		n, err := strconv.Atoi(digits)
		switch {
		case err != nil || digits == "" || strings.ContainsAny(digits, "+-"):
			return nil, fmt.Errorf("step %d (%q): not a node count (3) or a percentage (10%%)", i+1, f)
		case percent && (n < 1 || n > 100):
			return nil, fmt.Errorf("step %d (%q): a percentage is 1%% to 100%%", i+1, f)
		case !percent && n < 1:
			return nil, fmt.Errorf("step %d (%q): a step reaches at least 1 node", i+1, f)
		case percent:
			st.Percent = n
		default:
			st.Count = n
		}
		if len(steps) > 0 {
			prev := steps[len(steps)-1]
			if prev.Percent == 100 {
				return nil, fmt.Errorf("step %d (%q): comes after 100%%, which reaches every node", i+1, f)
			}
			if (prev.Percent > 0 && st.Percent > 0 && st.Percent < prev.Percent) || (prev.Count > 0 && st.Count > 0 && st.Count < prev.Count) {
				return nil, fmt.Errorf("step %d (%q): smaller than step %d (%s); a step gives the nodes reached in all", i+1, f, i, prev)
			}
		}
		steps = append(steps, st)
	}
	if last := steps[len(steps)-1]; last.Percent != 100 {
		return nil, fmt.Errorf("the last step is %s: the steps must end in 100%%", last)
	}
	return steps, nil
}

// FailureLimit is how many NACKing nodes a rollout tolerates over all its
// steps: a count, or a percentage of the live nodes at the start (rounded
// down). The zero value tolerates none.
type FailureLimit struct {
	Count   int
	Percent int // 0 to 100
}

// String is the limit as ParseFailureLimit reads it: "2" or "10%".
func (f FailureLimit) String() string {
	if f.Percent > 0 {
		return strconv.Itoa(f.Percent) + "%"
	}
	return strconv.Itoa(f.Count)
}

// Nodes is how many of n nodes may fail: Count, or floor(Percent × n / 100).
func (f FailureLimit) Nodes(n int) int {
	if f.Percent > 0 {
		return f.Percent * n / 100
	}
	return f.Count
}

// ParseFailureLimit reads a count ("0", "2") or a percentage ("10%").
func ParseFailureLimit(s string) (FailureLimit, error) {
	digits, percent := strings.CutSuffix(strings.TrimSpace(s), "%")
	n, err := strconv.Atoi(digits)
	switch {
	case err != nil || digits == "" || strings.ContainsAny(digits, "+-") || n < 0:
		return FailureLimit{}, fmt.Errorf("%q: not a count of nodes (2) or a percentage (10%%)", s)
	case percent && n > 100:
		return FailureLimit{}, fmt.Errorf("%q: a percentage is 0%% to 100%%", s)
	case percent:
		return FailureLimit{Percent: n}, nil
	}
	return FailureLimit{Count: n}, nil
}

// rolloutOrder is the order in which a rollout takes the live nodes: the
// canaries first, as given, then the others by name. A canary that is not
// live, or named twice, is an error.
func rolloutOrder(live, canary []string) ([]string, error) {
	live = slices.Sorted(slices.Values(live))
	seen := map[string]bool{}
	order := make([]string, 0, len(live))
	for _, c := range canary {
		switch {
		case seen[c]:
			return nil, fmt.Errorf("canary node %s named twice", c)
		case !slices.Contains(live, c):
			return nil, fmt.Errorf("canary node %q is not a live node of the fleet (live: %s)", c, strings.Join(live, ", "))
		}
		seen[c] = true
		order = append(order, c)
	}
	for _, n := range live {
		if !seen[n] {
			order = append(order, n)
		}
	}
	return order, nil
}

// rolloutSizes resolves steps against n live nodes: the nodes reached in
// all after each step. A step larger than the fleet, or smaller than the
// one before, is an error naming it.
func rolloutSizes(steps []StepSize, n int) ([]int, error) {
	sizes := make([]int, len(steps))
	for i, st := range steps {
		sizes[i] = st.Nodes(n)
		switch {
		case sizes[i] > n:
			return nil, fmt.Errorf("step %d (%s) reaches %d nodes: more than the %d live nodes of the fleet", i+1, st, sizes[i], n)
		case i > 0 && sizes[i] < sizes[i-1]:
			return nil, fmt.Errorf("step %d (%s) reaches %d nodes, fewer than step %d (%s) with %d: a step gives the nodes reached in all",
				i+1, st, sizes[i], i, steps[i-1], sizes[i-1])
		}
	}
	return sizes, nil
}
