package etcd_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/steadystate/steadystate/etcd"
)

// STEPS as an operator writes them: what is read, what is refused and
// why; and what each step reaches of a fleet (ceil of a percentage).
func TestParseSteps(t *testing.T) {
	for _, tc := range []struct {
		in    string
		want  string // the steps as read, or the error's text
		sizes []int  // of 7 nodes
	}{
		{"1,10%,50%,100%", "1,10%,50%,100%", []int{1, 1, 4, 7}},
		{" 2 , 100% ", "2,100%", []int{2, 7}},
		{"100%", "100%", []int{7}},
		{"1,1,100%", "1,1,100%", []int{1, 1, 7}},
		{"3,30%,100%", "3,30%,100%", []int{3, 3, 7}},
		{"", "no steps", nil},
		{"1,50%", "the last step is 50%: the steps must end in 100%", nil},
		{"1,x,100%", `step 2 ("x"): not a node count`, nil},
		{"1,,100%", `step 2 (""): not a node count`, nil},
		{"0,100%", `step 1 ("0"): a step reaches at least 1 node`, nil},
		{"-1,100%", `step 1 ("-1"): not a node count`, nil},
		{"1,0%,100%", `step 2 ("0%"): a percentage is 1% to 100%`, nil},
		{"101%", `step 1 ("101%"): a percentage is 1% to 100%`, nil},
		{"1.5%,100%", `step 1 ("1.5%"): not a node count`, nil},
		{"100%,100%", `step 2 ("100%"): comes after 100%`, nil},
		{"50%,10%,100%", `step 2 ("10%"): smaller than step 1 (50%)`, nil},
		{"3,2,100%", `step 2 ("2"): smaller than step 1 (3)`, nil},
	} {
		steps, err := etcd.ParseSteps(tc.in)
		if tc.sizes == nil {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseSteps(%q): %v, %v; want an error saying %q", tc.in, steps, err, tc.want)
			}
			continue
		}
		var got []string
		var sizes []int
		for _, st := range steps {
			got = append(got, st.String())
			sizes = append(sizes, st.Nodes(7))
		}
		if err != nil || strings.Join(got, ",") != tc.want || !slices.Equal(sizes, tc.sizes) {
			t.Errorf("ParseSteps(%q): %v (sizes %v), %v; want %s (sizes %v)", tc.in, got, sizes, err, tc.want, tc.sizes)
		}
	}
}

func TestParseFailureLimit(t *testing.T) {
	for _, tc := range []struct {
		in    string
		want  string
		nodes int // of 7
	}{
		{"0", "0", 0}, {"2", "2", 2}, {"10%", "10%", 0}, {"50%", "50%", 3}, {"100%", "100%", 7}, {"0%", "0", 0},
		{"", `"": not a count`, -1}, {"-1", "not a count", -1}, {"x", "not a count", -1}, {"101%", "a percentage is 0% to 100%", -1},
	} {
		f, err := etcd.ParseFailureLimit(tc.in)
		if tc.nodes < 0 {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseFailureLimit(%q): %v, %v; want an error saying %q", tc.in, f, err, tc.want)
			}
			continue
		}
		if err != nil || f.String() != tc.want || f.Nodes(7) != tc.nodes {
			t.Errorf("ParseFailureLimit(%q): %v (%d nodes), %v; want %s (%d)", tc.in, f, f.Nodes(7), err, tc.want, tc.nodes)
		}
	}
}

// Whatever an operator types, ParseSteps returns steps that read back the
// same, end in 100% and never shrink, or an error; never a panic.
func FuzzParseSteps(f *testing.F) {
	for _, s := range []string{"1,10%,50%,100%", "100%", "2,1,100%", "0%", ",", "1,100%,", "%", "99999999999999999999,100%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		steps, err := etcd.ParseSteps(s)
		if err != nil {
			return
		}
		var text []string
		for _, st := range steps {
			text = append(text, st.String())
		}
		again, err := etcd.ParseSteps(strings.Join(text, ","))
		if err != nil || !slices.Equal(again, steps) {
			t.Fatalf("%q read as %v, which reads back as %v, %v", s, text, again, err)
		}
		if steps[len(steps)-1].Percent != 100 {
			t.Fatalf("%q: last step %v", s, steps[len(steps)-1])
		}
		// Percentages never shrink, and reach at most the fleet.
		for n := 1; n < 50; n += 7 {
			prev := 0
			for _, st := range steps {
				if st.Percent == 0 {
					continue
				}
				if st.Nodes(n) < prev || st.Nodes(n) > n {
					t.Fatalf("%q over %d nodes: %v reaches %d after %d", s, n, st, st.Nodes(n), prev)
				}
				prev = st.Nodes(n)
			}
		}
	})
}

// Every failure limit that parses reads back the same.
func FuzzParseFailureLimit(f *testing.F) {
	for _, s := range []string{"0", "3", "10%", "100%", "-1", "%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := etcd.ParseFailureLimit(s)
		if err != nil {
			return
		}
		again, err := etcd.ParseFailureLimit(l.String())
		if err != nil || again != l || l.Nodes(10) < 0 {
			t.Fatalf("%q read as %v, which reads back as %v, %v", s, l, again, err)
		}
	})
}
