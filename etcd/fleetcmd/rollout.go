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
	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/steadystate/steadystate/etcd"
)

// Exit codes of a rollout (`fleet apply --rollout`, `fleet rollout
// resume`): 0 when it completed.
const (
	RolloutHalted      = 1 // a step failed: it was rolled back
	RolloutInterrupted = 3 // the command stopped (signal, lost claim, etcd error): the rollout is paused or was taken over
)

// rolloutFlags are `fleet apply`'s rollout flags.
type rolloutFlags struct {
	steps       string
	canary      []string
	maxFailures string
	stepTimeout time.Duration
	stepPause   time.Duration
	force       bool
}

func (f *rolloutFlags) declare(fs *pflag.FlagSet) {
	fs.StringVar(&f.steps, "rollout", "", "roll out in steps: a comma list of node counts and percentages of the live nodes ending in 100% (e.g. 1,10%,50%,100%)")
	fs.StringSliceVar(&f.canary, "canary-nodes", nil, "with --rollout: these live nodes first, in this order")
	fs.StringVar(&f.maxFailures, "max-failures", "0", "with --rollout: NACKing nodes tolerated over the whole rollout, a count or a percentage of the live nodes")
	fs.DurationVar(&f.stepTimeout, "step-timeout", etcd.DefaultStepTimeout, "with --rollout: how long a step waits for every node of its cohort to answer")
	fs.DurationVar(&f.stepPause, "step-pause", 0, "with --rollout: how long a step waits (bakes) once every node answered, before the next")
	fs.BoolVar(&f.force, "force", false, "abort (roll back) a rollout under way or paused first")
}

// check refuses flags that do not go together, and parses the steps and
// the failure limit: before anything is read or written.
func (f *rolloutFlags) check(fs *pflag.FlagSet, node string) ([]etcd.StepSize, etcd.FailureLimit, error) {
	usage := func(err error) ([]etcd.StepSize, etcd.FailureLimit, error) {
		return nil, etcd.FailureLimit{}, ExitError{Code: ExitUsage, Err: fmt.Errorf("not applied: %w", err)}
	}
	if !fs.Changed("rollout") {
		for _, name := range []string{"canary-nodes", "max-failures", "step-timeout", "step-pause"} {
			if fs.Changed(name) {
				return usage(fmt.Errorf("--%s goes with --rollout", name))
			}
		}
		return nil, etcd.FailureLimit{}, nil
	}
	if node != "" {
		return usage(errors.New("--rollout with --node: a rollout goes over the fleet-wide state; apply a node's own state without it"))
	}
	steps, err := etcd.ParseSteps(f.steps)
	if err != nil {
		return usage(fmt.Errorf("--rollout %q: %w", f.steps, err))
	}
	limit, err := etcd.ParseFailureLimit(f.maxFailures)
	if err != nil {
		return usage(fmt.Errorf("--max-failures: %w", err))
	}
	switch {
	case f.stepTimeout <= 0:
		return usage(fmt.Errorf("--step-timeout %v: must be positive", f.stepTimeout))
	case f.stepPause < 0:
		return usage(fmt.Errorf("--step-pause %v: must not be negative", f.stepPause))
	}
	for _, n := range f.canary {
		if n == "" || strings.ContainsAny(n, "/\x00") {
			return usage(fmt.Errorf("--canary-nodes: %q is not a node name", n))
		}
	}
	return steps, limit, nil
}

// abortWhole aborts the rollout under way with etcd.AbortRollout; when
// its driver wrote between the abort's read and its write (a conflict: the
// driver is alive), it reads again and retries, at most maxApplyRetries
// times, calling retry before each.
func abortWhole(ctx context.Context, c *clientv3.Client, l etcd.Layout, reason string, retry func(attempt int, err error)) (etcd.Rollout, error) {
	for attempt := 0; ; attempt++ {
		r, err := etcd.AbortRollout(ctx, c, l, reason)
		if !errors.Is(err, etcd.ErrConflict) {
			return r, err
		}
		if attempt == maxApplyRetries {
			return r, fmt.Errorf("%w; gave up after %d retries", err, attempt)
		}
		retry(attempt+1, err)
	}
}

// abortRetry says on w that an abort is retried.
func abortRetry(w io.Writer) func(int, error) {
	return func(attempt int, err error) {
		fmt.Fprintf(w, "the rollout changed while it was aborted (%v); reading it again and retrying (%d of %d)\n", err, attempt, maxApplyRetries)
	}
}

// abortFirst is --force: it aborts the rollout under way, if any.
func abortFirst(ctx context.Context, c *clientv3.Client, l etcd.Layout, w, errw io.Writer) error {
	r, err := abortWhole(ctx, c, l, "by `fleet apply --force`", abortRetry(errw))
	switch {
	case errors.Is(err, etcd.ErrNoRollout):
		return nil
	case err != nil:
		return fmt.Errorf("--force: aborting the rollout under way: %w", err)
	}
	fmt.Fprintf(w, "--force: aborted rollout %s at revision %d: its %d reached node(s) return to the state in force before it\n", r.ID, r.Revision, r.Switched)
	return nil
}

// rollOut is `fleet apply --rollout`: it starts the rollout and drives it
// to its end.
func rollOut(cmd *cobra.Command, c *clientv3.Client, l etcd.Layout, file string, objects map[string]map[string][]byte,
	f *rolloutFlags, steps []etcd.StepSize, limit etcd.FailureLimit) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	w := cmd.OutOrStdout()
	d, err := etcd.StartRollout(ctx, c, l, etcd.RolloutSpec{
		Tables: objects, Steps: steps, Canary: f.canary, MaxFailures: limit, StepTimeout: f.stepTimeout, StepPause: f.stepPause,
		Source: file, Progress: func(st etcd.RolloutStep) { printProgress(w, st) },
	})
	if errors.Is(err, etcd.ErrNothingToRollOut) {
		fmt.Fprintf(w, "%s: %v\n", file, err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s not applied: %w", file, err)
	}
	r := d.Rollout()
	fmt.Fprintf(w, "rollout %s of %s: %d live nodes in order %s; steps %s reach %s; max failures %s (%d); step timeout %v, pause %v\n",
		r.ID, file, len(r.Nodes), strings.Join(r.Nodes, ", "), strings.Join(r.Steps, ","), ints(r.Sizes), r.MaxFailures, r.MaxFailed, r.StepTimeout, r.StepPause)
	return drive(ctx, d, c, l, w)
}

// drive runs d to the end, printing each step, and says how it ended: nil
// when completed, an ExitError otherwise.
func drive(ctx context.Context, d *etcd.RolloutDriver, c *clientv3.Client, l etcd.Layout, w io.Writer) error {
	defer d.Close(context.WithoutCancel(ctx))
	r, err := d.Run(ctx, func(st etcd.RolloutStep) { printStep(w, st) })
	switch {
	case err == nil:
		fmt.Fprintf(w, "%s: every step passed; the new state is in force fleet-wide at revision %d (rollout %s, %v)\n",
			r.Result, r.Revision, r.ID, r.Ended.Sub(r.Started).Round(time.Millisecond))
		return nil
	case errors.Is(err, etcd.ErrRolloutHalted):
		fmt.Fprintf(w, "%s at revision %d: %s\n", r.Result, r.Revision, r.Reason)
		for _, a := range d.RolledBack() {
			if a.Answer == etcd.AnswerACK {
				fmt.Fprintf(w, "  %s: back at the previous state (applied at revision %d)\n", a.Node, a.Desired)
			} else {
				fmt.Fprintf(w, "  %s: not back at the previous state yet (%s: %s)\n", a.Node, a.Answer, strings.Join(a.Errors, "; "))
			}
		}
		return ExitError{Code: RolloutHalted, Err: fmt.Errorf("rollout %s %s: %s", r.ID, r.Result, r.Reason)}
	}
	if errors.Is(err, context.Canceled) {
		// Paused at once: Close (deferred) revokes the lease.
		return ExitError{Code: RolloutInterrupted, Err: fmt.Errorf("interrupted: rollout %s paused at step %d of %d; `fleet rollout resume` continues it, `fleet rollout abort` rolls it back",
			r.ID, r.Step+1, len(r.Steps))}
	}
	return ExitError{Code: RolloutInterrupted, Err: fmt.Errorf("rollout %s at step %d of %d: %w (`fleet rollout status` says where it stands)", r.ID, r.Step+1, len(r.Steps), err)}
}

// rollout is `fleet rollout`.
func (c *commands) rollout() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "The rollout under way (fleet apply --rollout): status, resume, abort; and the history",
		Long: `A rollout (` + "`fleet apply -f FILE --rollout STEPS`" + `) lives in etcd, not in the command
that started it: its steps, the step reached, each node's answer and its
result. If that command dies, the rollout is paused once its lease expires
(` + etcd.RolloutLeaseTTL.String() + `); any machine can resume or abort it.

  fleet rollout status    the rollout under way: running or paused, step reached, each reached node's answer
  fleet rollout resume    continue a paused rollout from the step reached
  fleet rollout abort     roll the rollout back: every reached node returns to the previous state
  fleet rollout history   the last ` + fmt.Sprint(etcd.RolloutHistoryKept) + ` rollouts: start, end, steps, result, failing nodes`,
	}
	cmd.AddCommand(c.rolloutStatus(), c.rolloutResume(), c.rolloutAbort(), c.rolloutHistory())
	return cmd
}

func (c *commands) rolloutStatus() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "The rollout under way: running (its driver) or paused, step reached, each reached node's answer now",
		Long: `Print the rollout under way: its source, steps and the nodes they reach,
whether it is running (a driver holds its lease) or paused (none does:
resume or abort it), the step under way and each reached node's answer as
read now (ACK, NACK with its errors, or none with why). Without one, says
so. A rollout state that does not parse is named with its key and error;
nothing is done from it.`,
		Args: cobra.NoArgs,
	}
	format := cmd.Flags().String("format", "table", "output format: table, json or yaml")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := checkFormat(*format); err != nil {
			return err
		}
		client, err := c.opts.Client()
		if err != nil {
			return err
		}
		defer client.Close()
		ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
		defer cancel()
		st, err := etcd.RolloutStatus(ctx, client, c.opts.Layout())
		if err != nil {
			return err
		}
		return printStatus(cmd.OutOrStdout(), st, *format)
	}
	return cmd
}

func (c *commands) rolloutResume() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "resume [--step-timeout D] [--step-pause D]",
		Short: "Continue a paused rollout from the step reached, printing each step as apply --rollout does",
		Long: `Take a paused rollout over and drive it to its end, from the step reached:
that step runs again (its nodes stay switched, recorded NACKs stay
counted, the answers are awaited anew). Refused while a live driver holds
it. Exits 0 when it completed, ` + fmt.Sprint(RolloutHalted) + ` when it halted (rolled back), ` + fmt.Sprint(RolloutInterrupted) + ` when
interrupted (paused again).`,
		Args: cobra.NoArgs,
	}
	timeout := cmd.Flags().Duration("step-timeout", 0, "replace the rollout's step timeout")
	pause := cmd.Flags().Duration("step-pause", 0, "replace the rollout's step pause")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		opts := etcd.ResumeOptions{Progress: func(st etcd.RolloutStep) { printProgress(cmd.OutOrStdout(), st) }}
		if cmd.Flags().Changed("step-timeout") {
			opts.StepTimeout = timeout
		}
		if cmd.Flags().Changed("step-pause") {
			opts.StepPause = pause
		}
		client, err := c.opts.Client()
		if err != nil {
			return err
		}
		defer client.Close()
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		d, err := etcd.ResumeRollout(ctx, client, c.opts.Layout(), opts)
		if err != nil {
			return err
		}
		r := d.Rollout()
		fmt.Fprintf(cmd.OutOrStdout(), "resuming rollout %s of %s at step %d of %d (%d of %d nodes switched)\n",
			r.ID, r.Source, r.Step+1, len(r.Steps), r.Switched, len(r.Nodes))
		return drive(ctx, d, client, c.opts.Layout(), cmd.OutOrStdout())
	}
	return cmd
}

func (c *commands) rolloutAbort() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "abort [--reason TEXT] [--timeout D]",
		Short: "Roll the rollout under way back (running or paused), and wait for the reached nodes to apply the previous state",
		Long: `Roll the rollout under way back, whether its driver runs or it is paused:
in one etcd transaction every reached node returns to the state in force
before the rollout, and the rollout goes to the history ("halted, rolled
back": aborted). Its driver, if any, stops at its next step; if the
driver wrote meanwhile, it reads the rollout again and retries (at most
` + fmt.Sprint(maxApplyRetries) + ` times, said on stderr). Then it waits
(up to --timeout) for each reached node to apply the previous state, and
prints each; it exits 1 if one did not in time.`,
		Args: cobra.NoArgs,
	}
	reason := cmd.Flags().String("reason", "", "why, kept in the history")
	timeout := cmd.Flags().Duration("timeout", time.Minute, "how long to wait for the reached nodes")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		client, err := c.opts.Client()
		if err != nil {
			return err
		}
		defer client.Close()
		ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
		defer cancel()
		r, err := abortWhole(ctx, client, c.opts.Layout(), *reason, abortRetry(cmd.ErrOrStderr()))
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		fmt.Fprintf(w, "rollout %s %s at revision %d (%s)\n", r.ID, r.Result, r.Revision, r.Reason)
		if r.Switched == 0 {
			return nil
		}
		wctx, wcancel := context.WithTimeout(cmd.Context(), *timeout)
		defer wcancel()
		answers, werr := etcd.WaitAnswers(wctx, client, c.opts.Layout(), r.Named, r.Reached(), r.Revision)
		for _, a := range answers {
			if a.Answer == etcd.AnswerACK {
				fmt.Fprintf(w, "  %s: back at the previous state (applied at revision %d)\n", a.Node, a.Desired)
			} else {
				fmt.Fprintf(w, "  %s: not back at the previous state (%s: %s)\n", a.Node, a.Answer, strings.Join(a.Errors, "; "))
			}
		}
		if werr != nil {
			return fmt.Errorf("not every reached node applied the previous state within %v", *timeout)
		}
		return nil
	}
	return cmd
}

func (c *commands) rolloutHistory() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "history [--format table|json|yaml]",
		Short: "The last rollouts, oldest first: start, end, steps, result, failing nodes and errors",
		Args:  cobra.NoArgs,
	}
	format := cmd.Flags().String("format", "table", "output format: table, json or yaml")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := checkFormat(*format); err != nil {
			return err
		}
		client, err := c.opts.Client()
		if err != nil {
			return err
		}
		defer client.Close()
		ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
		defer cancel()
		hist, warnings, err := etcd.RolloutHistory(ctx, client, c.opts.Layout())
		if err != nil {
			return err
		}
		return printHistory(cmd.OutOrStdout(), hist, warnings, *format)
	}
	return cmd
}
