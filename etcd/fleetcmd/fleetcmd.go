package fleetcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/steadystate/steadystate/etcd"
)

// Config is what the command set needs of the program.
type Config struct {
	// Tables are the program's tables as named in etcd: apply writes them,
	// status reads their desired revisions. Required.
	Tables []string
	// Decode reads a desired-state file (its path and contents) into each
	// table's objects (name → value, as the program's agents decode them
	// in fleet mode), validated as the program validates its desired
	// state; its error should name the file, the line and the entry. A
	// table of Tables missing from the result is emptied. Required.
	Decode func(path string, data []byte) (map[string]map[string][]byte, error)
	// Program names the program in the help, e.g. "agent" (default
	// "the program").
	Program string
}

// Command returns `fleet` with its subcommands apply (with --rollout),
// rollout (status, resume, abort, history), status, watch and forget,
// over the etcd named by the --etcd-* flags: the operator's side of
// fleet mode, which any cobra root mounts (as statedbcmd's db). Errors that
// choose an exit code implement ExitCode() int (ExitError).
func Command(cfg Config) *cobra.Command {
	prog := cfg.Program
	if prog == "" {
		prog = "the program"
	}
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "The fleet in etcd: apply a desired file to every node or one, see what is applied where",
		Long: `The fleet's desired state and status in etcd, shared by every node of ` + prog + ` in
fleet mode (--etcd-endpoints). Each table's objects are kept fleet-wide
(every node) and per node (one node; where both have an object of the same
name, the node's wins).

  fleet apply -f FILE [--node NAME]   replace the desired state (fleet-wide, or one node's)
  fleet apply -f FILE --rollout STEPS roll it out fleet-wide in steps, each gated by its nodes' answers
  fleet rollout status|resume|abort|history
                                      the rollout under way, and the last ones
  fleet status [--wait]               every node, live or lost: revision reached, received, applied, errors
  fleet watch                         the same, again at every change
  fleet forget NODE                   stop listing a lost node

Every command refuses a prefix whose layout version (PREFIX/layout) it does
not know, rather than misread it.`,
	}
	opts := &etcd.ClientOptions{Prefix: etcd.DefaultPrefix}
	opts.Flags(cmd.PersistentFlags())
	c := &commands{cfg: cfg, opts: opts}
	cmd.AddCommand(c.apply(), c.rollout(), c.status(), c.watch(), c.forget())
	return cmd
}

// commands holds what the subcommands share.
type commands struct {
	cfg  Config
	opts *etcd.ClientOptions
}

// Exit codes of the command set.
const (
	ExitUsage = 2 // a bad flag or argument

	// `fleet status --wait`: 0 when every live node applied the revision.
	WaitFailed   = 1 // a live node that received it reports an error
	WaitTimedOut = 2 // --timeout passed first
)

// ExitError ends a command with an exit code.
type ExitError struct {
	Code int
	Err  error
}

func (e ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e ExitError) Unwrap() error { return e.Err }

// ExitCode is the process's exit code.
func (e ExitError) ExitCode() int { return e.Code }

// apply is `fleet apply`.
func (c *commands) apply() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "apply -f FILE [--node NAME | --rollout STEPS [--canary-nodes A,B] [--max-failures N|P%] [--step-timeout D] [--step-pause D]] [--force]",
		Short: "Validate a desired-state file as a node does and make it the fleet's (or one node's) desired state",
		Long: `Validate a desired-state file exactly as a node does and make it
the desired state of every node (or, with --node, of that node alone),
replacing what that scope held: objects not in the file are removed.

A file that does not parse or validate writes nothing. The tables'
new state is written with etcd.ApplyTables: a small change in one
transaction, a large one staged under new generations and put in force by
one transaction for all of them, so that a node sees the old or the new
state whole, never a mix; a failure leaves the old state in force.

The apply is declarative: the file's whole state, every table, goes in
force or none of it. If another apply wrote any of the tables of the
scope between this one's read and its commit (a conflict), it reads again
and retries, at most ` + fmt.Sprint(maxApplyRetries) + ` times, and says so on stderr; so two
concurrent applies of different files end with one file's state in force,
never a mix. Its last line says the etcd revision at which the file's state
went into force ("... in force at revision R"), and whether it retried;
` + "`fleet status`" + ` says which nodes have applied it.

With --rollout STEPS the file's state goes in force fleet-wide step by
step (etcd.StartRollout): STEPS is a comma list of node counts and
percentages ending in 100% (1,10%,50%,100%: a step of p% reaches
ceil(p x the live nodes at the start) in all), the live nodes taken by
name, --canary-nodes first. Each node of a step switches from the old
state to the new in one transaction; then the step waits until every one
of them answers: ACK (it applied the new state) or NACK (an object in
Error, Rejected or DeleteFailing, with the error). More NACKing nodes
over the whole rollout than --max-failures, or a step not answered within
--step-timeout, halts the rollout and rolls it back: every reached node returns to the
state in force before it. Each step is printed as it goes; the exit code
is 0 when every step passed, ` + fmt.Sprint(RolloutHalted) + ` when it halted (naming the nodes and
errors), ` + fmt.Sprint(RolloutInterrupted) + ` when this command stopped first (the rollout is then
paused: ` + "`fleet rollout resume|abort`" + `). Nodes outside the reached steps, and
nodes that join meanwhile, keep the old state until the rollout completes.

While a rollout is under way or paused every apply is refused, naming it;
--force aborts (rolls back) that rollout first (retried, as an apply is,
when its driver writes meanwhile).`,
		Args: cobra.NoArgs,
	}
	file := cmd.Flags().StringP("filename", "f", "", "the desired-state file (YAML, or JSON if it ends in .json)")
	node := cmd.Flags().String("node", "", "apply to this node alone (default: every node)")
	var rf rolloutFlags
	rf.declare(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *file == "" {
			return ExitError{Code: ExitUsage, Err: errors.New("-f: give the desired-state file to apply")}
		}
		steps, limit, err := rf.check(cmd.Flags(), *node)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(*file)
		if err != nil {
			return err
		}
		objects, err := c.cfg.Decode(*file, data)
		if err != nil {
			return fmt.Errorf("not applied: %w", err)
		}
		for _, t := range c.cfg.Tables {
			if objects[t] == nil {
				objects[t] = map[string][]byte{}
			}
		}
		if cmd.Flags().Changed("node") && *node == "" {
			return ExitError{Code: ExitUsage, Err: errors.New("--node \"\": give a node name, or leave --node out to apply to every node")}
		}
		if strings.ContainsAny(*node, "/\x00") {
			return ExitError{Code: ExitUsage, Err: fmt.Errorf("--node %q: a node name has no '/'", *node)}
		}
		scope := etcd.ScopeAll
		if *node != "" {
			scope = etcd.NodeScope(*node)
		}
		client, err := c.opts.Client()
		if err != nil {
			return err
		}
		defer client.Close()
		if rf.force {
			fctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			err := abortFirst(fctx, client, c.opts.Layout(), cmd.OutOrStdout(), cmd.ErrOrStderr())
			cancel()
			if err != nil {
				return err
			}
		}
		if steps != nil {
			return rollOut(cmd, client, c.opts.Layout(), *file, objects, &rf, steps, limit)
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
		defer cancel()
		rev, retries, err := applyWhole(ctx, client, c.opts.Layout(), scope, objects, func(attempt int, err error) {
			fmt.Fprintf(cmd.ErrOrStderr(), "another apply to %s came first (%v); reading again and retrying (%d of %d)\n",
				scopeName(*node), err, attempt, maxApplyRetries)
		})
		if err != nil {
			return fmt.Errorf("applying %s to %s (nothing of it is in force): %w", *file, scopeName(*node), err)
		}
		var counts []string
		for _, t := range c.cfg.Tables {
			counts = append(counts, fmt.Sprintf("%d %s", len(objects[t]), t))
		}
		fmt.Fprintf(cmd.OutOrStdout(), "applied %s to %s: %s; in force at revision %d%s\n",
			*file, scopeName(*node), strings.Join(counts, ", "), rev, retried(retries))
		return nil
	}
	return cmd
}

// maxApplyRetries is how many times `fleet apply` reads again and retries
// after a conflict.
const maxApplyRetries = 3

// applyWhole puts tables in force in scope with etcd.ApplyTables; on a
// conflict (another apply wrote one of the tables meanwhile) it reads
// again and retries, at most maxApplyRetries times, calling retry before
// each. It returns the revision at which the state is in force and how
// many times it retried.
func applyWhole(ctx context.Context, c *clientv3.Client, l etcd.Layout, scope string, tables map[string]map[string][]byte,
	retry func(attempt int, err error)) (int64, int, error) {
	for attempt := 0; ; attempt++ {
		rev, err := etcd.ApplyTables(ctx, c, l, scope, tables)
		if !errors.Is(err, etcd.ErrConflict) {
			return rev, attempt, err
		}
		if attempt == maxApplyRetries {
			return 0, attempt, fmt.Errorf("%w; gave up after %d retries", err, attempt)
		}
		retry(attempt+1, err)
	}
}

// retried is the end of apply's last line: whether it retried.
func retried(n int) string {
	switch n {
	case 0:
		return " (first try)"
	case 1:
		return " (after 1 retry: another apply came first)"
	}
	return fmt.Sprintf(" (after %d retries: other applies came first)", n)
}

func scopeName(node string) string {
	if node == "" {
		return "every node"
	}
	return "node " + node
}

// checkFormat is the check of --format (table, json or yaml): an exit-2
// usage error.
func checkFormat(format string) error {
	switch format {
	case "table", "json", "yaml":
		return nil
	}
	return ExitError{Code: ExitUsage, Err: fmt.Errorf("--format %q: must be one of table, json, yaml", format)}
}

// status is `fleet status`.
func (c *commands) status() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status [--wait [--revision R] [--timeout D]]",
		Short: `Every node, live or lost: revision reached, received, applied, errors; and "applied on N of M nodes at revision R"`,
		Long: `Print every node of the fleet: the live ones (their agent keeps their status
under a lease) and the lost ones (their lease expired without a clean stop:
a crash, a partition longer than --status-ttl), each lost node with its last
status and when it was last seen, until ` + "`fleet forget NODE`" + `; a node
whose agent stopped cleanly is not listed. For each: the etcd revision it
has reached, the revision of its desired state (the fleet-wide one and its
own), whether it received it (its tables hold it: it reached that
revision) and applied it (received, and every object Done; a rejected
object is not applied), its objects by status and its latest errors. Keys
under the prefix that are not a node's (malformed, foreign) are named in
warning lines and skipped. The last line is the summary "applied on N of M
nodes at revision R", R being the latest desired state, M counting live
and lost nodes, followed by " (K lost)" when K > 0 (a lost node is never
counted as applied: what it holds now is not known). While a rollout is
under way (` + "`fleet apply --rollout`" + `) the nodes it switched and the others
hold different desired states: a line names it (its id, running or
paused, the step under way, the nodes switched) and the summary reads
"applied on N of M nodes, each at its own desired state (rollout ID under
way)", naming no revision.

With --wait it waits, following the prefix with an etcd watch, until at
least one node is live and every live node applied revision R
(--revision, default: the latest desired state when it starts; a node
counts once it applied its own desired state at or past R), prints the
status and exits 0 (with no live node, nothing is applied anywhere known:
it waits; while a rollout is under way it waits for it to finish, and
says so on stderr); it exits 1 as soon as a live
node that received it reports an error (objects in Error, Rejected or
DeleteFailing), and
2 after --timeout, printing the status last read either way.`,
		Args: cobra.NoArgs,
	}
	format := cmd.Flags().String("format", "table", "output format: table, json or yaml")
	objects := cmd.Flags().Bool("objects", false, "also list each node's objects not Done (nodes run with --object-status)")
	wait := cmd.Flags().Bool("wait", false, "wait until every live node applied --revision: exit 0, 1 on a node's error, 2 on --timeout")
	revision := cmd.Flags().Int64("revision", 0, "with --wait: the desired state's revision to wait for (default: the latest)")
	timeout := cmd.Flags().Duration("timeout", defaultWaitTimeout, "with --wait: how long to wait before exiting 2")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := checkFormat(*format); err != nil {
			return err
		}
		if !*wait && (cmd.Flags().Changed("revision") || cmd.Flags().Changed("timeout")) {
			return ExitError{Code: ExitUsage, Err: errors.New("--revision and --timeout go with --wait")}
		}
		if *revision < 0 || *timeout <= 0 {
			return ExitError{Code: ExitUsage, Err: fmt.Errorf("--revision %d, --timeout %v: give a revision >= 0 and a timeout > 0", *revision, *timeout)}
		}
		client, err := c.opts.Client()
		if err != nil {
			return err
		}
		defer client.Close()
		if *wait {
			return waitFleet(cmd.Context(), client, c.opts.Layout(), c.cfg.Tables, waitOptions{revision: *revision, timeout: *timeout, objects: *objects},
				cmd.OutOrStdout(), cmd.ErrOrStderr(), *format)
		}
		rep, err := Read(cmd.Context(), client, c.opts.Layout(), c.cfg.Tables, *objects)
		if err != nil {
			return err
		}
		return rep.Print(cmd.OutOrStdout(), *format)
	}
	return cmd
}

// forget is `fleet forget`.
func (c *commands) forget() *cobra.Command {
	return &cobra.Command{
		Use:   "forget NODE",
		Short: "Stop listing a lost node (its lease expired without a clean stop); refused for a live node",
		Long: `Remove a lost node's record: ` + "`fleet status`" + ` no longer lists it. A node is
lost when its agent's lease expired without a clean stop (a crash, a
partition longer than --status-ttl); it stays listed, with its last status
and when it was last seen, until it runs again or is forgotten. A live node
(its agent runs) is refused: stop its agent first (a clean stop leaves no
record). An agent may run again under a forgotten (or lost) name at any
time.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := c.opts.Client()
			if err != nil {
				return err
			}
			defer client.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			if err := etcd.CheckLayout(ctx, client, c.opts.Layout()); err != nil {
				return err
			}
			if err := etcd.Forget(ctx, client, c.opts.Layout(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "forgot node %s: it is no longer listed\n", args[0])
			return nil
		},
	}
}

// watch is `fleet watch`.
func (c *commands) watch() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Print the fleet status, then again whenever a node's status or the desired state changes (Ctrl-C ends)",
		Args:  cobra.NoArgs,
	}
	format := cmd.Flags().String("format", "table", "output format: table, json (one object per line) or yaml")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := checkFormat(*format); err != nil {
			return err
		}
		client, err := c.opts.Client()
		if err != nil {
			return err
		}
		defer client.Close()
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return watchFleet(ctx, client, c.opts.Layout(), c.cfg.Tables, cmd.OutOrStdout(), cmd.ErrOrStderr(), *format)
	}
	return cmd
}

// watchFleet prints the fleet status at once and after every change of the
// keys under the prefix (statuses, desired state) from the revision it
// read, changes within 100ms printed once, and every 10s in any case (a
// node whose lease expired, etcd unreachable: said on stderr), until ctx
// ends. A lost watch is opened again. A layout version it does not know
// ends it with that error.
func watchFleet(ctx context.Context, c *clientv3.Client, l etcd.Layout, tables []string, w, errw io.Writer, format string) error {
	prefix := l.Root()
	var last string
	var rev int64
	show := func() error {
		rep, err := Read(ctx, c, l, tables, false)
		if errors.Is(err, etcd.ErrUnknownLayout) {
			return err
		}
		if err != nil {
			fmt.Fprintf(errw, "reading the fleet: %v (trying again)\n", err)
			return err
		}
		rev = rep.read
		var b strings.Builder
		if err := rep.Print(&b, format); err != nil {
			return err
		}
		if b.String() == last {
			return nil
		}
		last = b.String()
		if format == "table" {
			fmt.Fprintf(w, "--- %s\n", time.Now().Format(time.TimeOnly))
		}
		_, err = io.WriteString(w, last)
		return err
	}
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for ctx.Err() == nil {
		if err := show(); errors.Is(err, etcd.ErrUnknownLayout) {
			return err
		} else if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		wctx, cancel := context.WithCancel(ctx)
		events := c.Watch(clientv3.WithRequireLeader(wctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	watching:
		for {
			select {
			case <-ctx.Done():
				break watching
			case <-tick.C:
				if errors.Is(show(), etcd.ErrUnknownLayout) {
					break watching // the next show returns it
				}
			case resp, ok := <-events:
				if !ok || resp.Err() != nil {
					break watching
				}
				// Let a burst settle: one print for an apply's transactions.
				settle := time.After(100 * time.Millisecond)
			drain:
				for {
					select {
					case <-settle:
						break drain
					case _, ok := <-events:
						if !ok {
							break drain
						}
					}
				}
				if errors.Is(show(), etcd.ErrUnknownLayout) {
					break watching
				}
			}
		}
		cancel()
	}
	return nil
}
