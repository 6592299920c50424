package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/steadystate/steadystate/etcd/fleetcell"
	"github.com/steadystate/steadystate/hive"
)

// AgentConfig is the agent's configuration: flags of `agent run`, or
// environment variables STEADYSTATE_AGENT_DESIRED etc.
type AgentConfig struct {
	// Desired is the desired-state file (YAML, or JSON if it ends in .json).
	// Exactly one of Desired and fleet mode's --etcd-endpoints
	// (fleetcell.Config) is given (run checks that one is, so that `agent
	// run cells` needs neither).
	Desired string
	// NetNS is where to reconcile: "sandbox" (a private network namespace
	// made for the agent and removed at exit), "host" (the real host, root
	// only) or the name of an existing namespace (ip netns).
	NetNS string
	// Socket is the unix socket of the status API; "" means the one of
	// the namespace (see SocketPath).
	Socket string
	// StateDir holds the agent's durable record (see state.go); "" means
	// the default directory of the managed namespace (StateDirPath).
	StateDir string
	// SettleTime is how long the desired file must stay unchanged before
	// it is read (see watchFile).
	SettleTime time.Duration
	// ReloadInterval is how often the desired file is read without a
	// change notification: the fallback for what notifications miss.
	ReloadInterval time.Duration
	// PruneInterval is how often each reconciler prunes (what
	// its target owns and is not desired goes); the first runs right after
	// the first load.
	PruneInterval time.Duration
	// RefreshInterval is the age after which an applied object is checked
	// again and any drift repaired: a backstop, since the targets report
	// drift as it happens (a route deleted by hand, a sysctl changed).
	RefreshInterval time.Duration
	// MemoryBudget is the memory the Go runtime may use before its
	// collector must run (a soft limit, in GOMEMLIMIT's syntax; "0" is
	// none): see membudget.go.
	MemoryBudget string
}

// Defaults of `agent run`'s intervals.
const (
	DefaultRefreshInterval = 10 * time.Minute
	DefaultSettleTime      = 500 * time.Millisecond
	DefaultReloadInterval  = 10 * time.Second
)

// envSocket is the environment variable of --socket, which the client
// commands read too.
var (
	envSocket   = hive.EnvName(envPrefix, "socket")
	envNetNS    = hive.EnvName(envPrefix, "netns")
	envStateDir = hive.EnvName(envPrefix, "state-dir")
)

// defaultConfig is what `agent run` uses without flags.
func defaultConfig() AgentConfig {
	return AgentConfig{
		NetNS: netnsSandbox,
		// The file is watched; a change is read once it has been quiet
		// for the settle time, and the poll is only a fallback.
		SettleTime:     DefaultSettleTime,
		ReloadInterval: DefaultReloadInterval,
		// Leftovers are pruned within a minute.
		PruneInterval: time.Minute,
		// Drift (someone changing a route or rule behind the agent's back)
		// is repaired within ten minutes, by refreshing objects at a
		// limited rate rather than all at once.
		RefreshInterval: DefaultRefreshInterval,
		MemoryBudget:    DefaultMemoryBudget,
	}
}

// Flags implements cell.Flagger.
func (def AgentConfig) Flags(fs *pflag.FlagSet) {
	fs.String("desired", def.Desired, "desired-state file (YAML, or JSON if it ends in .json); or fleet mode's --etcd-endpoints")
	fs.String("netns", def.NetNS, `network namespace to manage: "sandbox" (private, removed at exit), "host" (root only) or an existing namespace's name`)
	fs.String("socket", def.Socket, "unix socket of the status API (default: one per --netns, see `agent cleanup --help`)")
	fs.String("state-dir", def.StateDir, "directory of the agent's durable record (original values, what it applied); default: one per --netns under "+stateRoot())
	fs.Duration("settle-time", def.SettleTime, "how long the desired file must stay unchanged before it is read (write it via rename to be safe)")
	fs.Duration("reload-interval", def.ReloadInterval, "how often to read the desired file without a change notification (fallback)")
	fs.Duration("prune-interval", def.PruneInterval, "how often to prune what the agent applied and is no longer desired (the first runs after the first load)")
	fs.Duration("refresh-interval", def.RefreshInterval, "age after which an applied object is checked again and any drift repaired (a backstop: the targets report drift as it happens)")
	fs.String("memory-budget", def.MemoryBudget, "memory the Go runtime may use before its garbage collector must run (a soft limit, as GOMEMLIMIT; raised to 1.25x the live heap if that is larger; 0 for none; off if GOGC or GOMEMLIMIT is set)")
}

// Validate implements the config check of hive.
func (c AgentConfig) Validate() error {
	if c.SettleTime < 0 {
		return fmt.Errorf("--settle-time: must not be negative, got %v", c.SettleTime)
	}
	if c.ReloadInterval <= 0 {
		return fmt.Errorf("--reload-interval: must be positive, got %v", c.ReloadInterval)
	}
	if c.PruneInterval <= 0 {
		return fmt.Errorf("--prune-interval: must be positive, got %v", c.PruneInterval)
	}
	if c.RefreshInterval <= 0 {
		return fmt.Errorf("--refresh-interval: must be positive, got %v", c.RefreshInterval)
	}
	if _, err := parseBytes(c.MemoryBudget); err != nil {
		return fmt.Errorf("--memory-budget: %w", err)
	}
	return nil
}

// StateDirPath is --state-dir, or by default the directory of the
// managed namespace (defaultStateDir; a sandbox's is its own, by pid).
func (c AgentConfig) StateDirPath() string {
	if c.StateDir != "" {
		return c.StateDir
	}
	return defaultStateDir(c.NetNS, os.Getpid())
}

// SocketPath is --socket, or by default the socket of the managed
// namespace (socketFor).
func (c AgentConfig) SocketPath() string {
	if c.Socket != "" {
		return c.Socket
	}
	return socketFor(c.NetNS)
}

// clientSocket is the socket the client commands use: --socket, else
// $STEADYSTATE_AGENT_SOCKET, else the one of --netns (default: that of
// $STEADYSTATE_AGENT_NETNS, else the sandbox's).
func clientSocket(socket, netns string) string {
	switch {
	case socket != "":
		return socket
	case os.Getenv(envSocket) != "":
		return os.Getenv(envSocket)
	case netns != "":
		return socketFor(netns)
	case os.Getenv(envNetNS) != "":
		return socketFor(os.Getenv(envNetNS))
	}
	return socketFor(netnsSandbox)
}

// checkMode checks that the agent has one source of desired state: a file
// (--desired) or the fleet's etcd (--etcd-endpoints), not both, not neither.
func checkMode(c AgentConfig, fleet fleetcell.Config) error {
	switch {
	case c.Desired != "" && fleet.Enabled():
		return fmt.Errorf("--desired and --etcd-endpoints: give one, not both (a file, or the fleet's etcd)")
	case c.Desired == "" && !fleet.Enabled():
		return errors.New("--desired FILE or --etcd-endpoints HOST:PORT[,...]: give the desired state's source (a file, or the fleet's etcd)")
	}
	return nil
}

// fileMode tells whether the agent takes its desired state from a file.
func fileMode(fleet fleetcell.Config) bool { return !fleet.Enabled() }
