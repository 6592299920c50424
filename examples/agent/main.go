package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/steadystate/steadystate/etcd/fleetcell"
	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/reflector/filesource"
)

// envPrefix prefixes the environment variables that set `agent run` flags
// (STEADYSTATE_AGENT_DESIRED, STEADYSTATE_AGENT_NETNS, ...; see
// hive.EnvName), and every other variable of the agent.
const envPrefix = "STEADYSTATE_AGENT"

func main() {
	os.Exit(execute(rootCommand()))
}

// exitUsage is the exit code of `agent run` started wrongly (as a bad
// flag's): the desired file missing.
const exitUsage = 2

// exitCoder is an error that chooses the process's exit code.
type exitCoder interface{ ExitCode() int }

// execute runs cmd and returns the exit code: 0, the code of an error
// that has one (agent diff's 1 for "changes"), else 1.
func execute(cmd *cobra.Command) int {
	err := cmd.Execute()
	if err == nil {
		return 0
	}
	if ec, ok := err.(exitCoder); ok {
		return ec.ExitCode()
	}
	return 1
}

func rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "agent",
		Short:         "Example steadystate node agent: sysctls, routes and iptables rules from a desired-state file or a fleet's etcd",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	root.AddCommand(runCommand(), diffCommand(), statusCommand(), dbCommand(), cleanupCommand(), fleetCommand())
	return root
}

// runCommand is the hive's own command, renamed to run. The hive reads its
// flags and environment variables; the namespace is chosen and made inside
// it (see Namespace), except that an unprivileged sandbox needs the whole
// agent to run again in a user + network namespace.
//
// Before the hive starts (so before the namespace is made or anything is
// applied), run takes the namespace's lock and checks the socket (a second
// agent fails here), then sweeps what dead agents left (see leftovers.go).
// SIGHUP stops a sandbox agent like SIGTERM (its terminal went away); with
// --netns host or NAME it reads the desired file again.
func runCommand() *cobra.Command {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var run runParts
	h := hive.NewWithOptions(hive.Options{Logger: log, EnvPrefix: envPrefix},
		append(agentCells(), cell.Invoke(run.take), cell.Provide(run.prefetch))...)
	cmd := h.Command()
	cmd.Use = "run"
	cmd.Short = "Reconcile the desired-state file, or the fleet's desired state in etcd (in a private network namespace unless --netns says otherwise)"
	cmd.RunE = func(c *cobra.Command, args []string) error {
		gcOn, _ := buildGCOff(runFlag(c, "memory-budget"))
		run.pre = prefetchFor(c)
		if err := h.Populate(); err != nil {
			return err
		}
		ns, cfg, l, fleetMode := run.ns, run.cfg, run.l, run.fleet.Enabled()
		if ns.Reexec {
			gcOn() // this process starts no hive: no budget at Start to take over
		}
		if err := checkMode(cfg, run.fleet); err != nil {
			return exitError{code: exitUsage, err: err}
		}
		// The file is required at start: an agent with nothing loaded
		// would only wait (and, later, prune everything it finds).
		if _, err := os.Stat(cfg.Desired); err != nil && !fleetMode {
			return exitError{code: exitUsage, err: fmt.Errorf("--desired %s: %w (a desired-state file is required at start; write `{}` to it for an empty desired state)", cfg.Desired, err)}
		}
		if msg := missingTools(); msg != "" {
			log.Warn(msg)
		}
		if ns.Reexec && fleetMode {
			// The whole agent would run in a network of its own, where
			// the fleet's etcd is not reachable.
			return exitError{code: exitUsage, err: errors.New("--etcd-endpoints: fleet mode needs root for its sandbox (unprivileged, the agent runs in a network namespace of its own, away from etcd); run as root, or with --netns NAME")}
		}
		if ns.Reexec {
			log.Info("Not root: running in a new user + network namespace; the host is not changed")
			code, err := runInUserNS(cfg.SocketPath(), cfg.StateDirPath(), run.notify)
			if err != nil {
				return err
			}
			if code != 0 {
				os.Exit(code)
			}
			return nil
		}
		if cfg.NetNS != netnsSandbox {
			release, err := lockNamespace(cfg.NetNS)
			if err != nil {
				return err
			}
			defer release()
		}
		if err := checkSocket(cfg.SocketPath()); err != nil {
			return err
		}
		if err := sweepLeftovers(log, runDir()); err != nil {
			log.Warn("Removing dead agents' leftovers failed", "error", err)
		}
		stop := onSIGHUP(func() {
			if cfg.NetNS == netnsSandbox {
				log.Info("SIGHUP: stopping (a sandbox agent stops with its terminal)")
				h.Shutdown()
				return
			}
			if fleetMode {
				log.Info("SIGHUP: nothing to read again in fleet mode (the desired state is watched in etcd)")
				return
			}
			log.Info("SIGHUP: reading the desired file again")
			l.Reload()
		})
		defer stop()
		if fleetMode {
			run.notify.Status("listing the desired state from etcd")
		} else {
			run.notify.Status("loading the desired state from " + cfg.Desired)
		}
		return h.Run()
	}
	return cmd
}

// missingTools says, once at start, which command the targets need is not
// installed and which package has it ("" when all are there): without it,
// every rule would fail on its own.
func missingTools() string {
	for _, t := range []struct{ cmd, pkg string }{
		{"iptables-restore", "iptables"},
		{"iptables-save", "iptables"},
	} {
		if _, err := exec.LookPath(t.cmd); err != nil {
			return fmt.Sprintf("%s not found: iptables rules cannot be applied; install the %s package (Debian/Ubuntu: apt-get install %s)", t.cmd, t.pkg, t.pkg)
		}
	}
	return ""
}

// onSIGHUP calls fn on every SIGHUP until the returned stop is called.
func onSIGHUP(fn func()) (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-sigs:
				fn()
			case <-done:
				return
			}
		}
	})
	return func() {
		signal.Stop(sigs)
		close(done)
		wg.Wait()
	}
}

// cleanupCommand removes what agents killed with SIGKILL left behind.
func cleanupCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Remove what dead agents left behind: sandbox namespaces and sockets",
		Long: `Remove what agents that could not clean up (SIGKILL, a crash) left behind:
sandbox network namespaces /var/run/netns/steadystate-agent-PID whose PID is
dead (root only), and sockets in the run directory where no agent answers.
Every agent does this at start too.

Each agent has its files in the run directory (/run/steadystate-agent for
root, else $XDG_RUNTIME_DIR/steadystate-agent or /tmp/steadystate-agent-UID),
named after the namespace it manages (--netns): NS.sock (the status API;
` + "`agent status --netns NS`" + ` finds it) and NS.lock (held while it runs),
where NS is "sandbox", "host" or "netns-NAME".`,
		Args: cobra.NoArgs,
	}
	dryRun := cmd.Flags().Bool("dry-run", false, "only list what would be removed")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		out := cmd.OutOrStdout()
		found, err := findLeftovers(runDir())
		for _, l := range found {
			if *dryRun {
				fmt.Fprintf(out, "would remove %s %s\n", l.What, l.Path)
				continue
			}
			if rerr := l.remove(); rerr != nil {
				err = errors.Join(err, fmt.Errorf("removing %s %s: %w", l.What, l.Path, rerr))
				continue
			}
			fmt.Fprintf(out, "removed %s %s\n", l.What, l.Path)
		}
		return err
	}
	return cmd
}

// runParts are what the run command needs from the populated hive.
type runParts struct {
	ns     *Namespace
	cfg    AgentConfig
	fleet  fleetcell.Config
	l      *filesource.Source[fileObject] // nil in fleet mode
	notify *notifier
	// pre is the desired file's prefetch, started before the hive is
	// built (see prefetch.go); nil without one.
	pre *desiredPrefetch
}

// prefetch provides the prefetch to the hive (the file source's cache).
func (r *runParts) prefetch() *desiredPrefetch { return r.pre }

// runIn is what take takes: the file's source exists in file mode only.
type runIn struct {
	cell.In
	NS     *Namespace
	Config AgentConfig
	Fleet  fleetcell.Config
	Loader *filesource.Source[fileObject] `optional:"true"`
	Notify *notifier
}

// take keeps the parts: an Invoke of the hive, a named method so that
// `run cells` shows what it is.
func (p *runParts) take(in runIn) {
	p.ns, p.cfg, p.fleet, p.l, p.notify = in.NS, in.Config, in.Fleet, in.Loader, in.Notify
}
