package iptables

import (
	"math/rand/v2"
	"slices"
	"strconv"
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

// specOf gives each test rule name a spec of its own.
func specOf(name string) string { return "-m mark --mark " + strconv.Itoa(int(name[0])) + " -j ACCEPT" }

func mkDesired(t *testing.T, names ...string) []desiredRule {
	t.Helper()
	var out []desiredRule
	for _, n := range names {
		d, err := newDesiredRule(&Rule{Table: "filter", Chain: "INPUT", Name: n, Spec: specOf(n)})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// simulate applies the plan's commands to a model chain (names only,
// told apart by their specs; see specOf).
func simulate(t *testing.T, input string, chain []string, desired []desiredRule) []string {
	t.Helper()
	byArgs := map[string]string{}
	for _, d := range desired {
		byArgs[d.args] = d.name
	}
	for _, l := range strings.Split(strings.TrimSpace(input), "\n") {
		args, _ := splitSaveArgs(l)
		if len(args) < 2 || args[1] != "C" {
			continue
		}
		switch args[0] {
		case "-F":
			chain = nil
		case "-D":
			pos := atoi(t, args[2])
			chain = slices.Delete(chain, pos-1, pos)
		case "-I":
			chain = slices.Insert(chain, atoi(t, args[2])-1, byArgs[joinArgs(args[3:])])
		case "-A":
			chain = append(chain, byArgs[joinArgs(args[2:])])
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
		// The actual chain: some desired rules (maybe duplicated, maybe
		// stale), some undesired, some not identified, in random order.
		var actual []chainRule
		var actualNames []string
		for range rng.IntN(10) {
			n := pool[rng.IntN(len(pool))]
			r := chainRule{name: n, args: specOf(n), text: "-A C " + n}
			switch rng.IntN(6) {
			case 0:
				r = chainRule{text: "-A C -j DROP"}
			case 1:
				r.args = "-j DROP"
			}
			actual = append(actual, r)
			actualNames = append(actualNames, r.name)
		}
		st := &tableState{chains: map[string]bool{"C": true}, owned: map[string][]string{}, hooks: map[hookKey]int{{"INPUT", "C"}: 1}}
		p := &chainPlan{table: "filter", from: "INPUT", owned: "C", desired: desired, actual: actual}
		in := &restoreInput{}
		p.commands(in, st)
		got := simulate(t, string(in.buf), slices.Clone(actualNames), desired)
		if len(want) == 0 {
			if !strings.Contains(string(in.buf), "-X C") {
				t.Fatalf("empty desired state does not remove the chain:\n%s", in.buf)
			}
			continue
		}
		if !slices.Equal(got, want) {
			t.Fatalf("actual %q, desired %q: plan\n%s\nresults in %q", actualNames, want, in.buf, got)
		}
		// The result is the desired chain, with the texts of the rules
		// that stayed.
		for i, r := range p.result {
			if r.name != want[i] || r.args != desired[i].args || (r.text != "" && r.text != "-A C "+r.name) {
				t.Fatalf("result %d is %+v, want %q", i, r, want[i])
			}
		}
		// Nothing to do for a chain that is already right.
		again := &restoreInput{}
		p.actual = nil
		for _, d := range desired {
			p.actual = append(p.actual, chainRule{d.name, d.args, "-A C " + d.name})
		}
		p.commands(again, st)
		if again.cmds != 0 {
			t.Fatalf("plan for a converged chain:\n%s", again.buf)
		}
	}
}

func TestPlanHooksAndChains(t *testing.T) {
	empty := func() *tableState {
		return newTableState()
	}
	// A new chain is declared and hooked at the top.
	in := buildInput([]*chainPlan{{table: "filter", from: "INPUT", owned: "P-INPUT", desired: mkDesired(t, "a")}}, map[string]*tableState{"filter": empty()})
	want := "*filter\n:P-INPUT - [0:0]\n-I INPUT 1 -m comment --comment steadystate:hook -j P-INPUT\n-A P-INPUT " + specOf("a") + "\nCOMMIT\n"
	if string(in.buf) != want || in.rule(4) != "filter/INPUT/a" {
		t.Fatalf("input:\n%s", in.buf)
	}
	// Duplicate hooks are removed; a chain whose rules are all unknown is
	// flushed and written whole.
	st := empty()
	st.chains["P-INPUT"] = true
	st.hooks[hookKey{"INPUT", "P-INPUT"}] = 2
	st.hooks[hookKey{"FORWARD", "P-INPUT"}] = 1
	actual := []chainRule{{text: "-A P-INPUT -j DROP"}, {text: "-A P-INPUT -j ACCEPT"}}
	in = buildInput([]*chainPlan{{table: "filter", from: "INPUT", owned: "P-INPUT", desired: mkDesired(t, "a", "b"), actual: actual}}, map[string]*tableState{"filter": st})
	got := string(in.buf)
	if !strings.HasPrefix(got, "*filter\n-D ") ||
		!strings.Contains(got, "\n-D INPUT -m comment --comment steadystate:hook -j P-INPUT\n") ||
		!strings.Contains(got, "\n-D FORWARD -m comment --comment steadystate:hook -j P-INPUT\n") ||
		!strings.HasSuffix(got, "\n-F P-INPUT\n-A P-INPUT "+specOf("a")+"\n-A P-INPUT "+specOf("b")+"\nCOMMIT\n") ||
		strings.Count(got, "\n") != 7 {
		t.Fatalf("input:\n%s", got)
	}
}

func TestIdentify(t *testing.T) {
	ssh := chainRule{name: "ssh", args: "-p tcp --dport 22 -j ACCEPT", text: "-A C -p tcp -m tcp --dport 22 -j ACCEPT"}
	web := chainRule{name: "web", args: "-p tcp --dport 80 -j ACCEPT", text: "-A C -p tcp -m tcp --dport 80 -j ACCEPT"}
	drop := chainRule{name: "drop", args: "-j DROP", text: "-A C -j DROP"}
	unlearned := func(r chainRule) chainRule { r.text = ""; return r }
	stray := func(text string) chainRule { return chainRule{text: text} }
	for _, tt := range []struct {
		name  string
		rec   []chainRule
		texts []string
		want  []chainRule
	}{
		{"no record", nil, []string{ssh.text}, []chainRule{stray(ssh.text)}},
		{"empty", []chainRule{ssh}, nil, []chainRule{}},
		{"as written", []chainRule{ssh, web}, []string{ssh.text, web.text}, []chainRule{ssh, web}},
		{"learns by position", []chainRule{ssh, unlearned(web), unlearned(drop)}, []string{ssh.text, web.text, drop.text}, []chainRule{ssh, web, drop}},
		{"changed in place", []chainRule{ssh, web}, []string{ssh.text, "-A C -p tcp -m tcp --dport 81 -j ACCEPT"}, []chainRule{ssh, stray("-A C -p tcp -m tcp --dport 81 -j ACCEPT")}},
		{"moved", []chainRule{ssh, web, drop}, []string{drop.text, ssh.text, web.text}, []chainRule{drop, ssh, web}},
		{"duplicate", []chainRule{ssh, web}, []string{ssh.text, ssh.text, web.text}, []chainRule{ssh, stray(ssh.text), web}},
		{"unlearned after a change", []chainRule{ssh, unlearned(web)}, []string{web.text}, []chainRule{stray(web.text)}},
		{"learned text out of place", []chainRule{ssh, unlearned(web)}, []string{web.text, ssh.text}, []chainRule{stray(web.text), ssh}},
	} {
		if got := identify(tt.rec, tt.texts); !slices.Equal(got, tt.want) {
			t.Errorf("%s: identify = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// Every restore input that changes something has a line that changes
// something or fails the restore (-A, -I, -D, -X): a flush or a chain
// declaration alone could commit an empty transaction, which the watch's
// quiet windows could not tell from another program's (quietAlone).
func TestRestoreInputChanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pool := []string{"a", "b", "c", "d", "e"}
	kinds := map[string]int{}
	for range 5000 {
		st := newTableState()
		var plans []*chainPlan
		for _, from := range []string{"INPUT", "FORWARD"} {
			if rng.IntN(3) == 0 {
				continue
			}
			owned := "SS-" + from
			var desired []desiredRule
			for _, n := range pool {
				if rng.IntN(3) == 0 {
					desired = append(desired, mkDesired(t, n)[0])
				}
			}
			p := &chainPlan{table: "filter", from: from, owned: owned, desired: desired}
			if rng.IntN(3) > 0 { // the chain exists, maybe empty
				st.chains[owned] = true
				for range rng.IntN(4) {
					n := pool[rng.IntN(len(pool))]
					r := chainRule{name: n, args: specOf(n), text: "-A " + owned + " " + n}
					if rng.IntN(4) == 0 {
						r = chainRule{text: "-A " + owned + " -j DROP"}
					}
					p.actual = append(p.actual, r)
				}
			}
			for _, hookFrom := range []string{from, "OUTPUT"} {
				if n := rng.IntN(3); n > 0 && (st.chains[owned] || rng.IntN(2) == 0) {
					st.hooks[hookKey{hookFrom, owned}] = n - 1
				}
			}
			plans = append(plans, p)
		}
		if len(plans) == 0 {
			continue
		}
		in := buildInput(plans, map[string]*tableState{"filter": st})
		if in.cmds == 0 {
			continue
		}
		changes := false
		for _, l := range strings.Split(string(in.buf), "\n") {
			for _, k := range []string{"-A ", "-I ", "-D ", "-X ", "-F ", ":"} {
				if strings.HasPrefix(l, k) {
					kinds[k]++
					changes = changes || k != "-F " && k != ":"
				}
			}
		}
		if !changes {
			t.Fatalf("an input of %d commands with none that surely changes something:\n%s", in.cmds, in.buf)
		}
	}
	// The cases that matter were met.
	for _, k := range []string{"-A ", "-I ", "-D ", "-X ", "-F ", ":"} {
		if kinds[k] == 0 {
			t.Errorf("no input had a %q line: the test tests less than it says", k)
		}
	}
}
