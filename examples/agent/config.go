package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/steadystate/steadystate/etcd"
	"github.com/steadystate/steadystate/hive"
)

// AgentConfig is the agent's configuration: flags of `agent run`, or
// environment variables STEADYSTATE_AGENT_DESIRED etc.
type AgentConfig struct {
	// Desired is the desired-state file (YAML, or JSON if it ends in .json).
	// Exactly one of Desired and EtcdEndpoints is given (run checks that
	// one is, so that `agent run cells` needs neither).
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
	// FullReconciliationInterval is how often each reconciler prunes (what
	// its target owns and is not desired goes); the first runs right after
	// the first load.
	FullReconciliationInterval time.Duration
	// RefreshInterval is the age after which an applied object is checked
	// again and any drift repaired: a backstop, since the targets report
	// drift as it happens (a route deleted by hand, a sysctl changed).
	RefreshInterval time.Duration

	// EtcdEndpoints puts the agent in fleet mode (see fleet.go): the
	// desired state comes from the etcd cluster at these endpoints, and
	// the node's status goes back there.
	EtcdEndpoints []string
	// EtcdPrefix is the key prefix of the fleet in etcd.
	EtcdPrefix string
	// EtcdCACert, EtcdCert and EtcdKey are TLS files for etcd ("": none).
	EtcdCACert, EtcdCert, EtcdKey string
	// Node is the agent's name in the fleet: it takes the objects of its
	// own scope, and its status is kept under it. Two live agents may not
	// share one.
	Node string
	// StatusTTL is the lease of the node's status in etcd: it disappears
	// this long after the agent stopped without revoking it (a crash).
	StatusTTL time.Duration
	// ObjectStatus makes the node keep one status key per object in etcd
	// beside its summary (off by default: N nodes × M objects keys).
	ObjectStatus bool
}

// Defaults of `agent run`'s intervals.
const (
	DefaultRefreshInterval = 10 * time.Minute
	DefaultSettleTime      = 500 * time.Millisecond
	DefaultReloadInterval  = 10 * time.Second
	DefaultStatusTTL       = 10 * time.Second
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
		FullReconciliationInterval: time.Minute,
		// Drift (someone changing a route or rule behind the agent's back)
		// is repaired within ten minutes, by refreshing objects at a
		// limited rate rather than all at once.
		RefreshInterval: DefaultRefreshInterval,
		EtcdPrefix:      etcd.DefaultPrefix,
		Node:            defaultNode(),
		StatusTTL:       DefaultStatusTTL,
	}
}

// Flags implements cell.Flagger.
func (def AgentConfig) Flags(fs *pflag.FlagSet) {
	fs.String("desired", def.Desired, "desired-state file (YAML, or JSON if it ends in .json); or --etcd-endpoints")
	fs.String("netns", def.NetNS, `network namespace to manage: "sandbox" (private, removed at exit), "host" (root only) or an existing namespace's name`)
	fs.String("socket", def.Socket, "unix socket of the status API (default: one per --netns, see `agent cleanup --help`)")
	fs.String("state-dir", def.StateDir, "directory of the agent's durable record (original values, what it applied); default: one per --netns under "+stateRoot())
	fs.Duration("settle-time", def.SettleTime, "how long the desired file must stay unchanged before it is read (write it via rename to be safe)")
	fs.Duration("reload-interval", def.ReloadInterval, "how often to read the desired file without a change notification (fallback)")
	fs.Duration("full-reconciliation-interval", def.FullReconciliationInterval, "how often to prune what the agent applied and is no longer desired (the first runs after the first load)")
	fs.Duration("refresh-interval", def.RefreshInterval, "age after which an applied object is checked again and any drift repaired (a backstop: the targets report drift as it happens)")
	fs.StringSlice("etcd-endpoints", def.EtcdEndpoints, "fleet mode: take the desired state from the etcd cluster at these endpoints (HOST:PORT or URL, comma-separated) instead of --desired")
	fs.String("etcd-prefix", def.EtcdPrefix, "key prefix of the fleet in etcd")
	fs.String("etcd-cacert", def.EtcdCACert, "CA certificate file to verify the etcd servers (TLS)")
	fs.String("etcd-cert", def.EtcdCert, "client certificate file for etcd (TLS)")
	fs.String("etcd-key", def.EtcdKey, "client key file for etcd (TLS)")
	fs.String("node", def.Node, "fleet mode: this agent's node name (its own desired objects, its status); two live agents may not share one")
	fs.Duration("status-ttl", def.StatusTTL, "fleet mode: how long the node's status outlives an agent that died without leaving")
	fs.Bool("object-status", def.ObjectStatus, "fleet mode: also keep each object's status in etcd (`agent fleet status --objects` shows them)")
}

// Validate implements the config check of hive.
func (c AgentConfig) Validate() error {
	switch {
	case c.Desired != "" && c.fleetMode():
		return fmt.Errorf("--desired and --etcd-endpoints: give one, not both (a file, or the fleet's etcd)")
	case c.fleetMode() && (c.Node == "" || strings.ContainsAny(c.Node, "/\x00")):
		return fmt.Errorf("--node: a node name without '/' is required in fleet mode, got %q", c.Node)
	case c.fleetMode() && c.StatusTTL < 2*time.Second:
		return fmt.Errorf("--status-ttl: must be at least 2s, got %v", c.StatusTTL)
	}
	if c.SettleTime < 0 {
		return fmt.Errorf("--settle-time: must not be negative, got %v", c.SettleTime)
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
