package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/steadystate/steadystate/examples/iptables"
	"github.com/steadystate/steadystate/examples/routes"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// Exit codes of agent diff, as diff(1)'s.
const (
	diffSame    = 0
	diffChanges = 1
	diffTrouble = 2
)

// exitError ends a command with an exit code; its error, if any, has been
// printed.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

// ExitCode implements exitCoder.
func (e exitError) ExitCode() int { return e.code }

func diffCommand() *cobra.Command {
	def := defaultConfig()
	cmd := &cobra.Command{
		Use:   "diff",
		Short: "Print what a run would change, without changing anything",
		Long: `Print what "agent run" would change in the network namespace: the plan of
each target (sysctls, routes, iptables rules) for the desired-state file,
computed by reading the real system and changing nothing.

Exit status, as diff(1)'s: 0 when nothing would change, 1 when something
would, 2 on trouble (a file that does not load, an object that cannot be
planned).

A plan sees leftovers (applied earlier, no longer desired) only where the
target can recognise what it owns: routes of the agent's protocol
(` + fmt.Sprint(routes.DefaultProtocol) + `), rules in the agent's own iptables chains (` + iptables.DefaultChainPrefix + `-*),
and sysctls whose original values the agent's durable record (--state-dir)
holds: their restoration is listed, unless an agent running on the
namespace holds the record. With --netns sandbox (the default) the plan is
that of a run in a new, empty namespace.`,
		Args:          cobra.NoArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	netns := cmd.Flags().String("netns", def.NetNS, `network namespace to plan for: "sandbox" (a new, empty one), "host" (root only) or an existing namespace's name`)
	desired := cmd.Flags().String("desired", def.Desired, "desired-state file (YAML, or JSON if it ends in .json)")
	format := cmd.Flags().String("format", "table", "output format: table, json or yaml")
	stateDir := cmd.Flags().String("state-dir", "", "the agent's durable record, read (never written) for the sysctls to restore; default: the one of --netns")
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		fmt.Fprintln(c.ErrOrStderr(), "agent diff:", err)
		return exitError{code: diffTrouble, err: err}
	})
	cmd.RunE = func(c *cobra.Command, _ []string) error {
		code, err := runDiff(c.Context(), c.OutOrStdout(), AgentConfig{NetNS: *netns, Desired: *desired, StateDir: *stateDir}, *format)
		if err != nil {
			fmt.Fprintln(c.ErrOrStderr(), "agent diff:", err)
		}
		if code == diffSame {
			return nil
		}
		return exitError{code: code, err: err}
	}
	return cmd
}

// runDiff plans a run of cfg and writes the plan to w in format. It
// returns the exit code, and the error of a code 2 (to be printed).
func runDiff(ctx context.Context, w io.Writer, cfg AgentConfig, format string) (int, error) {
	if err := validFormat(format); err != nil {
		return diffTrouble, err
	}
	if cfg.Desired == "" {
		return diffTrouble, fmt.Errorf("--desired: give the desired-state file to plan")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	var lc hookList
	ns, err := newNamespace(cfg, &lc, slog.New(slog.DiscardHandler))
	if err != nil {
		return diffTrouble, err
	}
	if ns.Reexec {
		// An unprivileged sandbox: plan again inside a new user + network
		// namespace, as run does.
		code, err := runInUserNS(socketFor(netnsSandbox), "", nil) // diff notifies no one
		if err != nil {
			return diffTrouble, err
		}
		return code, nil // what it found, it printed
	}
	if err := lc.start(ctx); err != nil {
		return diffTrouble, err
	}
	plan, err := planAll(ctx, cfg, ns, os.Stderr)
	if serr := lc.stop(context.Background()); err == nil {
		err = serr
	}
	if err != nil {
		return diffTrouble, err
	}
	if err := writePlan(w, plan, format); err != nil {
		return diffTrouble, err
	}
	if len(plan) > 0 {
		return diffChanges, nil
	}
	return diffSame, nil
}

// planAll loads the desired file into tables of a database of its own and
// returns the dry run of each kind's target on them.
func planAll(ctx context.Context, cfg AgentConfig, ns *Namespace, warn io.Writer) (reconciler.Plan, error) {
	data, err := os.ReadFile(cfg.Desired)
	if err != nil {
		return nil, fmt.Errorf("reading desired state: %w", err)
	}
	f, err := decodeDesired(cfg.Desired, data)
	if err != nil {
		return nil, err
	}
	if _, err := validateDesired(cfg.Desired, f); err != nil {
		return nil, err
	}
	db := statedb.New()
	tables := make([]statedb.TableMeta, len(kinds))
	for i, k := range kinds {
		if tables[i], err = k.newTable(db); err != nil {
			return nil, err
		}
	}
	wtxn := db.WriteTxn(tables[0], tables[1:]...)
	for i, k := range kinds {
		if err := k.fill(wtxn, tables[i], f.of(k)); err != nil {
			wtxn.Abort()
			return nil, err
		}
	}
	wtxn.Commit()

	// The durable record tells which sysctls an earlier run changed, so
	// that their restoration is planned too. An agent running on the
	// namespace holds the record (and restores them itself): then, as
	// without a record, sysctl leftovers are not listed.
	var rec *stateRecord
	if cfg.NetNS != netnsSandbox {
		r, err := openStateReadOnly(cfg.StateDirPath(), 500*time.Millisecond)
		switch {
		case err == nil:
			rec = r
			defer r.db.Close()
		case errors.Is(err, errNoState):
		case errors.Is(err, errStateBusy):
			fmt.Fprintln(warn, "agent diff: the agent running there holds its record; sysctls it would restore are not listed")
		default:
			return nil, err
		}
	}
	var plan reconciler.Plan
	var errs []error
	for i := range kinds {
		p, err := kindDryRuns[i](ctx, db, tables[i], ns, cfg, rec)
		plan = append(plan, p...)
		errs = append(errs, err)
	}
	return plan, errors.Join(errs...)
}

// writePlan prints plan as a table (ACTION, OBJECT, DETAIL; nothing for an
// empty plan, as diff(1) prints nothing), JSON or YAML (a list of
// {action, object, detail}).
func writePlan(w io.Writer, plan reconciler.Plan, format string) error {
	if plan == nil {
		plan = reconciler.Plan{}
	}
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false) // "0 -> 1", not "0 -\u003e 1"
		return enc.Encode(plan)
	case "yaml":
		return yaml.NewEncoder(w).Encode(plan)
	}
	if len(plan) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ACTION\tOBJECT\tDETAIL")
	for _, c := range plan {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Action, c.Object, c.Detail)
	}
	return tw.Flush()
}

// hookList is a cell.Lifecycle outside a hive: the namespace's hooks, for
// agent diff.
type hookList []cell.HookInterface

// Append implements cell.Lifecycle.
func (h *hookList) Append(hook cell.HookInterface) { *h = append(*h, hook) }

// start starts the hooks in order; on a failure, the ones started are
// stopped.
func (h hookList) start(ctx context.Context) error {
	for i, hook := range h {
		if err := hook.Start(ctx); err != nil {
			return errors.Join(err, h[:i].stop(ctx))
		}
	}
	return nil
}

// stop stops the hooks in reverse order and joins their errors.
func (h hookList) stop(ctx context.Context) error {
	var errs []error
	for i := len(h) - 1; i >= 0; i-- {
		errs = append(errs, h[i].Stop(ctx))
	}
	return errors.Join(errs...)
}
