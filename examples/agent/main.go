package main

import (
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
)

// envPrefix prefixes the environment variables that set `agent run` flags
// (STEADYSTATE_AGENT_DESIRED, STEADYSTATE_AGENT_NETNS, ...; see
// hive.EnvName), and every other variable of the agent.
const envPrefix = "STEADYSTATE_AGENT"

func main() {
	os.Exit(execute(rootCommand()))
}

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
		Short:         "Example steadystate node agent: sysctls, routes and iptables rules from a desired-state file",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	root.AddCommand(runCommand(), diffCommand(), statusCommand(), dbCommand())
	return root
}

// runCommand is the hive's own command, renamed to run. The hive reads its
// flags and environment variables; the namespace is chosen and made inside
// it (see Namespace), except that an unprivileged sandbox needs the whole
// agent to run again in a user + network namespace.
func runCommand() *cobra.Command {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var ns *Namespace
	var cfg AgentConfig
	h := hive.NewWithOptions(hive.Options{Logger: log, EnvPrefix: envPrefix},
		append(agentCells(), cell.Invoke(func(n *Namespace, c AgentConfig) { ns, cfg = n, c }))...)
	cmd := h.Command()
	cmd.Use = "run"
	cmd.Short = "Reconcile the desired-state file (in a private network namespace unless --netns says otherwise)"
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if err := h.Populate(); err != nil {
			return err
		}
		if ns.Reexec {
			log.Info("Not root: running in a new user + network namespace; the host is not changed")
			code, err := runInUserNS(cfg.Socket)
			if err != nil {
				return err
			}
			if code != 0 {
				os.Exit(code)
			}
			return nil
		}
		return h.Run()
	}
	return cmd
}
