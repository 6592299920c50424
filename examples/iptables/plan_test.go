package iptables

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestLongestIncreasing(t *testing.T) {
	for _, tt := range []struct{ in, want []int }{
		{nil, nil},
		{[]int{5}, []int{0}},
		{[]int{0, 1, 2}, []int{0, 1, 2}},
		{[]int{2, 1, 0}, []int{2}},
		{[]int{3, 0, 1, 4, 2, 5}, []int{1, 2, 4, 5}},
	} {
		if got := longestIncreasing(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("longestIncreasing(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func mkDesired(t *testing.T, names ...string) []desiredRule {
	t.Helper()
	var out []desiredRule
	for _, n := range names {
		d, err := newDesiredRule(&Rule{Table: "filter", Chain: "INPUT", Name: n, Spec: "-j ACCEPT"})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// simulate applies the plan's commands to a model chain (names only).
func simulate(t *testing.T, input string, chain []string) []string {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSpace(input), "\n") {
		args, _ := splitSaveArgs(l)
		if len(args) < 2 || args[1] != "C" {
			continue
		}
		switch args[0] {
		case "-D":
			pos := atoi(t, args[2])
			chain = slices.Delete(chain, pos-1, pos)
		case "-I":
			name, _, _ := parseRuleComment(argAfter(args, "--comment"))
			chain = slices.Insert(chain, atoi(t, args[2])-1, name)
		case "-A":
			name, _, _ := parseRuleComment(argAfter(args, "--comment"))
			chain = append(chain, name)
		}
	}
	return chain
}

func atoi(t *testing.T, s string) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("bad number %q", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// TestPlanModel checks random chains against random desired states: the
// plan's commands always produce exactly the desired order, and rules
// already in a right relative order are not touched.
func TestPlanModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pool := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for iter := 0; iter < 2000; iter++ {
		var want []string
		for _, n := range pool {
			if rng.IntN(2) == 0 {
				want = append(want, n)
			}
		}
		desired := mkDesired(t, want...)
		hashes := map[string]string{}
		for _, d := range desired {
			hashes[d.name] = d.hash
		}
		// The actual chain: some desired rules (maybe duplicated, maybe
		// stale), some undesired, some foreign, in random order.
		var actual []ownedRule
		var actualNames []string
		for range rng.IntN(10) {
			n := pool[rng.IntN(len(pool))]
			r := ownedRule{name: n, hash: hashes[n]}
			switch rng.IntN(6) {
			case 0:
				r = ownedRule{}
			case 1:
				r.hash = "ffffffffffffffff"
			}
			actual = append(actual, r)
			actualNames = append(actualNames, r.name)
		}
		st := &tableState{chains: map[string]bool{"C": true}, owned: map[string][]ownedRule{"C": actual}, hooks: map[hookKey]int{{"INPUT", "C"}: 1}}
		p := &chainPlan{table: "filter", from: "INPUT", owned: "C", desired: desired}
		in := &restoreInput{}
		p.commands(in, st)
		got := simulate(t, string(in.buf), slices.Clone(actualNames))
		if len(want) == 0 {
			if !strings.Contains(string(in.buf), "-X C") {
				t.Fatalf("empty desired state does not remove the chain:\n%s", in.buf)
			}
			continue
		}
		if !slices.Equal(got, want) {
			t.Fatalf("actual %q, desired %q: plan\n%s\nresults in %q", actualNames, want, in.buf, got)
		}
		// Nothing to do for a chain that is already right.
		again := &restoreInput{}
		st.owned["C"] = nil
		for _, d := range desired {
			st.owned["C"] = append(st.owned["C"], ownedRule{d.name, d.hash})
		}
		p.commands(again, st)
		if again.cmds != 0 {
			t.Fatalf("plan for a converged chain:\n%s", again.buf)
		}
	}
}

func TestPlanHooksAndChains(t *testing.T) {
	empty := func() *tableState {
		return &tableState{chains: map[string]bool{}, owned: map[string][]ownedRule{}, hooks: map[hookKey]int{}}
	}
	// A new chain is declared and hooked at the top.
	in := buildInput([]*chainPlan{{table: "filter", from: "INPUT", owned: "P-INPUT", desired: mkDesired(t, "a")}}, map[string]*tableState{"filter": empty()})
	want := "*filter\n:P-INPUT - [0:0]\n-I INPUT 1 -m comment --comment steadystate:hook -j P-INPUT\n-A P-INPUT -m comment --comment a/"
	if !strings.HasPrefix(string(in.buf), want) || !strings.HasSuffix(string(in.buf), "COMMIT\n") || in.rule(4) != "filter/INPUT/a" {
		t.Fatalf("input:\n%s", in.buf)
	}
	// Duplicate hooks are removed; a prune adds nothing.
	st := empty()
	st.chains["P-INPUT"] = true
	st.hooks[hookKey{"INPUT", "P-INPUT"}] = 2
	st.hooks[hookKey{"FORWARD", "P-INPUT"}] = 1
	in = buildInput([]*chainPlan{{table: "filter", from: "INPUT", owned: "P-INPUT", desired: mkDesired(t, "a"), pruneOnly: true}}, map[string]*tableState{"filter": st})
	if got := strings.Count(string(in.buf), "-D "); got != 2 || strings.Contains(string(in.buf), "-A ") || strings.Contains(string(in.buf), "-I ") {
		t.Fatalf("prune input:\n%s", in.buf)
	}
}
