package iptables

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/steadystate/steadystate/reconciler"
)

func TestValidate(t *testing.T) {
	ok := Rule{Table: "filter", Chain: "INPUT", Name: "ssh", Spec: "-p tcp --dport 22 -j ACCEPT"}
	tests := []struct {
		change  func(r *Rule)
		wantErr string // substring; "" means valid
	}{
		{func(r *Rule) {}, ""},
		{func(r *Rule) { r.Spec = "" }, ""},
		{func(r *Rule) { r.Spec = `-j LOG --log-prefix "in: "` }, ""},
		{func(r *Rule) { r.Table, r.Chain, r.Spec = "nat", "POSTROUTING", "-s 10.0.0.0/8 -j MASQUERADE" }, ""},
		{func(r *Rule) { r.Spec = "! -s 10.0.0.0/8 -g DROP" }, ""},
		{func(r *Rule) { r.Table = "Filter" }, "field table"},
		{func(r *Rule) { r.Chain = "PREROUTING" }, "field chain"},
		{func(r *Rule) { r.Chain = "STEADYSTATE-INPUT" }, "field chain"},
		{func(r *Rule) { r.Name = "" }, "field name"},
		{func(r *Rule) { r.Name = "a/b" }, "field name"},
		{func(r *Rule) { r.Name = "a b" }, "field name"},
		{func(r *Rule) { r.Name = strings.Repeat("n", MaxNameLen+1) }, "field name"},
		{func(r *Rule) { r.Spec = "-j ACCEPT\n-A INPUT -j DROP" }, "field spec: line break"},
		{func(r *Rule) { r.Spec = "-j ACCEPT\r" }, "field spec: line break"},
		{func(r *Rule) { r.Spec = "-j ACCEPT # hi" }, "field spec: '#'"},
		{func(r *Rule) { r.Spec = `-j LOG --log-prefix 'x'` }, "double quotes only"},
		{func(r *Rule) { r.Spec = `-j LOG --log-prefix "x\"y"` }, "double quotes only"},
		{func(r *Rule) { r.Spec = `-j LOG --log-prefix "x` }, "unbalanced"},
		{func(r *Rule) { r.Spec = "-j ACCEPT\x00" }, "printable"},
		{func(r *Rule) { r.Spec = "-j ÄCCEPT" }, "printable"},
		{func(r *Rule) { r.Spec = "-j KUBE-SERVICES" }, "only standard targets"},
		{func(r *Rule) { r.Spec = "-g FOREIGN" }, "only standard targets"},
		{func(r *Rule) { r.Spec = "--jump FOREIGN" }, "only standard targets"},
		{func(r *Rule) { r.Spec = "--jum FOREIGN" }, "only standard targets"},
		{func(r *Rule) { r.Spec = "-jFOREIGN" }, "combined short option"},
		{func(r *Rule) { r.Spec = "-p tcp -j" }, "needs a target"},
		{func(r *Rule) { r.Spec = "-A INPUT -j ACCEPT" }, "a command"},
		{func(r *Rule) { r.Spec = "-t nat -j ACCEPT" }, "a table"},
		{func(r *Rule) { r.Spec = "-X" }, "a command"},
		{func(r *Rule) { r.Spec = `--comment "x" -j ACCEPT` }, "comment"},
		{func(r *Rule) { r.Spec = "-m comment -j ACCEPT" }, "comment"},
		{func(r *Rule) { r.Spec = strings.Repeat("x", MaxSpecLen+1) }, "longer than"},
	}
	for _, tt := range tests {
		r := ok
		tt.change(&r)
		err := r.Validate()
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("Validate(%+v) = %v, want nil", r, err)
		case tt.wantErr != "" && err == nil:
			t.Errorf("Validate(%+v) = nil, want an error with %q", r, tt.wantErr)
		case err != nil && (!strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrInvalid)):
			t.Errorf("Validate(%+v) = %v, want an ErrInvalid with %q", r, err, tt.wantErr)
		}
	}
}

func TestMethods(t *testing.T) {
	a := &Rule{Table: "filter", Chain: "INPUT", Name: "ssh", Priority: 1, Spec: `-p tcp  --dport 22 -j LOG --log-prefix "a b"`, Status: reconciler.StatusDone()}
	if a.Key() != "filter/INPUT/ssh" {
		t.Errorf("Key = %q", a.Key())
	}
	b := a.Clone()
	if b == a || *b != *a {
		t.Fatal("Clone is not an equal copy")
	}
	if b.SetStatus(reconciler.StatusPending()) != b || b.GetStatus().Kind != reconciler.StatusKindPending || a.Status.Kind != reconciler.StatusKindDone {
		t.Fatal("SetStatus must set on the receiver only and return it")
	}
	b.Spec = `-p tcp --dport 22 -j LOG --log-prefix "a b" `
	if !a.Equal(b) {
		t.Error("Equal must ignore status and spacing")
	}
	for _, change := range []func(r *Rule){
		func(r *Rule) { r.Priority = 2 },
		func(r *Rule) { r.Spec = "-p tcp --dport 23 -j ACCEPT" },
		func(r *Rule) { r.Spec = `-p tcp --dport 22 -j LOG --log-prefix "a  b"` },
		func(r *Rule) { r.Chain = "OUTPUT" },
	} {
		c := a.Clone()
		change(c)
		if a.Equal(c) {
			t.Errorf("Equal(%+v, %+v) = true", a, c)
		}
	}
	out, _ := json.Marshal(&Rule{Table: "filter", Chain: "INPUT", Name: "x", Spec: "-j DROP"})
	if string(out) != `{"table":"filter","chain":"INPUT","name":"x","spec":"-j DROP"}` {
		t.Errorf("JSON = %s", out)
	}
}

func TestSplitAndJoinArgs(t *testing.T) {
	args, err := splitArgs(` -p  tcp	-j LOG --log-prefix "a b: " --x ""`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"-p", "tcp", "-j", "LOG", "--log-prefix", "a b: ", "--x", ""}
	if !slices.Equal(args, want) {
		t.Fatalf("splitArgs = %q, want %q", args, want)
	}
	if got := joinArgs(args); got != `-p tcp -j LOG --log-prefix "a b: " --x ""` {
		t.Fatalf("joinArgs = %q", got)
	}
}

// FuzzValidate checks that a spec Validate accepts renders into one line
// of iptables-restore input that splits back into the same arguments,
// with no jump outside StandardTargets.
func FuzzValidate(f *testing.F) {
	for _, s := range []string{"-p tcp --dport 22 -j ACCEPT", `-j LOG --log-prefix "x y"`, "-j FOO", "#", `"`, "-jX", "--goto X", "\"a\"\"b\""} {
		f.Add("ssh", s)
	}
	f.Fuzz(func(t *testing.T, name, spec string) {
		r := &Rule{Table: "filter", Chain: "INPUT", Name: name, Spec: spec}
		if r.Validate() != nil {
			return
		}
		d, err := newDesiredRule(r)
		if err != nil {
			t.Fatalf("valid rule %q failed to render: %v", spec, err)
		}
		line := "-A STEADYSTATE-INPUT " + d.args
		if strings.ContainsAny(line, "\n\r#") {
			t.Fatalf("rendered line %q would break iptables-restore input", line)
		}
		args, err := specArgs(d.args)
		if err != nil {
			t.Fatalf("rendered spec %q does not parse: %v", d.args, err)
		}
		orig, _ := specArgs(spec)
		if !slices.Equal(args, orig) {
			t.Fatalf("spec %q renders as %q: args %q, want %q", spec, d.args, args, orig)
		}
		if d.args != joinArgs(orig) {
			t.Fatalf("spec %q renders as %q, want %q", spec, d.args, joinArgs(orig))
		}
		for i, a := range args {
			if isJump(a) && !standardTargets[args[i+1]] {
				t.Fatalf("spec %q jumps to %q", spec, args[i+1])
			}
		}
	})
}
