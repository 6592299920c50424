package fleetcmd

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/steadystate/steadystate/etcd"
)

// stepName is "step 2/3 (50%)".
func stepName(st etcd.RolloutStep) string {
	return fmt.Sprintf("step %d/%d (%s)", st.Index+1, st.Of, st.Size)
}

// printProgress says that a step's cohort is switched, or that every node
// answered and the step pauses.
func printProgress(w io.Writer, st etcd.RolloutStep) {
	if st.Result == etcd.StepBaking {
		fmt.Fprintf(w, "%s: every node answered (%d ACK, %d NACK); pausing before the step passes\n", stepName(st), len(st.ACK), len(st.NACK))
		return
	}
	switched := "no new node (switched before)"
	if len(st.New) > 0 {
		switched = "switched " + strings.Join(st.New, ", ")
	}
	fmt.Fprintf(w, "%s: %s; waiting for %d node(s)\n", stepName(st), switched, st.Reached)
}

// printStep says how a step ended: its ACKs, NACKs (node and errors) and
// the nodes without an answer, and how long it took.
func printStep(w io.Writer, st etcd.RolloutStep) {
	fmt.Fprintf(w, "%s: %s after %v: %d ACK", stepName(st), st.Result, st.Took().Round(time.Millisecond), len(st.ACK))
	if len(st.ACK) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(st.ACK, ", "))
	}
	fmt.Fprintf(w, ", %d NACK", len(st.NACK))
	if len(st.NoAnswer) > 0 {
		fmt.Fprintf(w, ", %d without an answer", len(st.NoAnswer))
	}
	fmt.Fprintln(w)
	for _, a := range st.NACK {
		fmt.Fprintf(w, "  NACK %s: %s\n", a.Node, strings.Join(a.Errors, "; "))
	}
	for _, a := range st.NoAnswer {
		fmt.Fprintf(w, "  no answer %s: %s\n", a.Node, strings.Join(a.Errors, "; "))
	}
}

func ints(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// printStatus prints the rollout under way (st nil: none).
func printStatus(w io.Writer, st *etcd.RolloutState, format string) error {
	if format != "table" {
		if st == nil {
			return printStructured(w, struct {
				Rollout any `json:"rollout"`
			}{nil}, format)
		}
		return printStructured(w, st, format)
	}
	if st == nil {
		_, err := fmt.Fprintln(w, "no rollout under way")
		return err
	}
	r := st.Rollout
	state := st.State
	if st.Driver != nil {
		state += fmt.Sprintf(" (driven by %s since %s)", st.Driver.Driver, st.Driver.Since.Format(time.RFC3339))
	} else {
		state += " (no driver: `fleet rollout resume` continues it, `fleet rollout abort` rolls it back)"
	}
	fmt.Fprintf(w, "rollout %s of %s, started %s: %s\n", r.ID, r.Source, r.Started.Format(time.RFC3339), state)
	fmt.Fprintf(w, "steps %s reach %s of %d nodes (%s); at step %d of %d; %d node(s) switched; max failures %s (%d), %d failed\n",
		strings.Join(r.Steps, ","), ints(r.Sizes), len(r.Nodes), strings.Join(r.Nodes, ", "), min(r.Step+1, len(r.Steps)), len(r.Steps),
		r.Switched, r.MaxFailures, r.MaxFailed, r.Failures())
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tANSWER\tDESIRED\tREACHED\tDETAIL")
	for _, a := range st.Now {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", a.Node, a.Answer, a.Desired, a.Reached, strings.Join(a.Errors, "; "))
	}
	return tw.Flush()
}

// printHistory prints the finished rollouts, oldest first.
func printHistory(w io.Writer, hist []etcd.Rollout, warnings []etcd.Warning, format string) error {
	if format != "table" {
		ws := make([]string, len(warnings))
		for i, x := range warnings {
			ws[i] = x.String()
		}
		return printStructured(w, struct {
			Rollouts []etcd.Rollout `json:"rollouts"`
			Warnings []string       `json:"warnings,omitempty"`
		}{append([]etcd.Rollout{}, hist...), ws}, format)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLLOUT\tSOURCE\tSTARTED\tENDED\tSTEPS\tREVISION\tRESULT\tFAILING")
	for _, r := range hist {
		var failing []string
		for _, a := range r.Failing {
			failing = append(failing, fmt.Sprintf("%s %s: %s", a.Node, a.Answer, strings.Join(a.Errors, "; ")))
		}
		result := r.Result
		if r.Reason != "" {
			result += " (" + r.Reason + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, r.Source, r.Started.Format(time.RFC3339), r.Ended.Format(time.RFC3339),
			strings.Join(r.Steps, ","), r.Revision, result, strings.Join(failing, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, x := range warnings {
		fmt.Fprintf(w, "warning: %s\n", x)
	}
	return nil
}

// printStructured prints v as JSON (one line) or YAML (from its JSON, so
// that both name the fields alike).
func printStructured(w io.Writer, v any, format string) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if format == "json" {
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	var node yaml.Node
	if err := yaml.Unmarshal(b, &node); err != nil {
		return err
	}
	blockStyle(&node)
	out, err := yaml.Marshal(&node)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "---\n%s", out)
	return err
}

// blockStyle makes a node read from JSON print as block YAML.
func blockStyle(n *yaml.Node) {
	if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
		n.Style = 0
	}
	if n.Kind == yaml.ScalarNode && n.Style == yaml.DoubleQuotedStyle {
		n.Style = 0
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}
