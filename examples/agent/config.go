package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/steadystate/steadystate/hive"
)

// AgentConfig is the agent's configuration: flags of `agent run`, or
// environment variables STEADYSTATE_AGENT_DESIRED etc.
type AgentConfig struct {
	// Desired is the desired-state file (YAML, or JSON if it ends in .json).
	Desired string
	// NetNS is where to reconcile: "sandbox" (a private network namespace
	// made for the agent and removed at exit), "host" (the real host, root
	// only) or the name of an existing namespace (ip netns).
	NetNS string
	// Socket is the unix socket of the status API.
	Socket string
	// ReloadInterval is how often the desired file is checked for changes.
	ReloadInterval time.Duration
	// FullReconciliationInterval is how often each reconciler prunes (what
	// its target owns and is not desired goes); the first runs right after
	// the first load.
	FullReconciliationInterval time.Duration
	// RefreshInterval is the age after which an applied object is applied
	// again, which repairs drift (a route deleted by hand, a sysctl
	// changed).
	RefreshInterval time.Duration
}

// DefaultRefreshInterval is the default of --refresh-interval.
const DefaultRefreshInterval = 10 * time.Minute

// envSocket is the environment variable of --socket, which the client
// commands read too.
var envSocket = hive.EnvName(envPrefix, "socket")

// defaultConfig is what `agent run` uses without flags.
func defaultConfig() AgentConfig {
	return AgentConfig{
		Desired:        "desired.yaml",
		NetNS:          netnsSandbox,
		Socket:         defaultSocket(),
		ReloadInterval: time.Second,
		// Leftovers are pruned within a minute.
		FullReconciliationInterval: time.Minute,
		// Drift (someone changing a route or rule behind the agent's back)
		// is repaired within ten minutes, by refreshing objects at a
		// limited rate rather than all at once.
		RefreshInterval: DefaultRefreshInterval,
	}
}

// Flags implements cell.Flagger.
func (def AgentConfig) Flags(fs *pflag.FlagSet) {
	fs.String("desired", def.Desired, "desired-state file (YAML, or JSON if it ends in .json)")
	fs.String("netns", def.NetNS, `network namespace to manage: "sandbox" (private, removed at exit), "host" (root only) or an existing namespace's name`)
	fs.String("socket", def.Socket, "unix socket of the status API")
	fs.Duration("reload-interval", def.ReloadInterval, "how often to check the desired file for changes")
	fs.Duration("full-reconciliation-interval", def.FullReconciliationInterval, "how often to prune what the agent applied and is no longer desired (the first runs after the first load)")
	fs.Duration("refresh-interval", def.RefreshInterval, "age after which an applied object is applied again, repairing drift")
}

// Validate implements the config check of hive.
func (c AgentConfig) Validate() error {
	if c.Desired == "" {
		return fmt.Errorf("--desired: a desired-state file is required")
	}
	if c.Socket == "" {
		return fmt.Errorf("--socket: must not be empty")
	}
	if c.ReloadInterval <= 0 {
		return fmt.Errorf("--reload-interval: must be positive, got %v", c.ReloadInterval)
	}
	if c.FullReconciliationInterval <= 0 {
		return fmt.Errorf("--full-reconciliation-interval: must be positive, got %v", c.FullReconciliationInterval)
	}
	if c.RefreshInterval <= 0 {
		return fmt.Errorf("--refresh-interval: must be positive, got %v", c.RefreshInterval)
	}
	return nil
}

// defaultSocket is /run/steadystate-agent.sock for root, else a socket in
// the user's runtime directory (or /tmp). The real user counts: inside the
// unprivileged sandbox the agent runs as a mapped root.
func defaultSocket() string {
	if v := os.Getenv(envSocket); v != "" {
		return v
	}
	if os.Geteuid() == 0 && os.Getenv(envSandboxed) == "" {
		return "/run/steadystate-agent.sock"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "steadystate-agent.sock")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("steadystate-agent-%d.sock", os.Getuid()))
}
