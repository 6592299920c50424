package main

import (
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/steadystate/steadystate/examples/internal/netnsutil"
	"github.com/steadystate/steadystate/hive"
)

// envPrefix prefixes the environment variables that set `agent run` flags:
// AGENT_DESIRED, AGENT_NETNS, ...
const envPrefix = "AGENT"

func main() {
	if err := rootCommand().Execute(); err != nil {
		os.Exit(1)
	}
}

func rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "agent",
		Short:         "Example steadystate node agent: sysctls, routes and iptables rules from a desired-state file",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	root.AddCommand(runCommand(), statusCommand(), dbCommand())
	return root
}

// runCommand is the hive's own command, renamed to run, with the network
// namespace set up around it.
func runCommand() *cobra.Command {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var ns netnsutil.NS
	h := hive.NewWithOptions(hive.Options{Logger: log, EnvPrefix: envPrefix}, agentCells(&ns)...)
	cmd := h.Command()
	cmd.Use = "run"
	cmd.Short = "Reconcile the desired-state file (in a private network namespace unless --netns says otherwise)"
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		mode := flagOrEnv(c, "netns")
		sb, err := setupNetNS(mode, log)
		if err != nil {
			return err
		}
		if sb.reexec {
			log.Info("Not root: running in a new user + network namespace; the host is not changed")
			code, err := runInUserNS(flagOrEnv(c, "socket"))
			if err != nil {
				return err
			}
			if code != 0 {
				os.Exit(code)
			}
			return nil
		}
		if sb.cleanup != nil {
			defer func() {
				if err := sb.cleanup(); err != nil {
					log.Error("Removing the sandbox network namespace", "error", err)
				}
			}()
		}
		ns = sb.ns
		return run(c, args)
	}
	return cmd
}

// flagOrEnv reads a flag of the run command before the hive parses its
// configuration: the flag if given, else its environment variable, else
// its default.
func flagOrEnv(c *cobra.Command, name string) string {
	f := c.Flags().Lookup(name)
	if f == nil {
		return ""
	}
	if !f.Changed {
		if v, ok := os.LookupEnv(hive.EnvName(envPrefix, name)); ok {
			return strings.TrimSpace(v)
		}
	}
	return f.Value.String()
}
