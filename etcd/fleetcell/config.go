package fleetcell

import (
	"cmp"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/pflag"

	"github.com/steadystate/steadystate/etcd"
	"github.com/steadystate/steadystate/hive/cell"
)

// Config is fleet mode's configuration: the flags --etcd-endpoints,
// --etcd-prefix, --etcd-cacert, --etcd-cert, --etcd-key, --node,
// --status-ttl and --object-status. Fleet mode is on when EtcdEndpoints is
// given.
type Config struct {
	// EtcdEndpoints puts the program in fleet mode: the desired state
	// comes from the etcd cluster at these endpoints, and the node's
	// status goes back there.
	EtcdEndpoints []string
	// EtcdPrefix is the key prefix of the fleet in etcd.
	EtcdPrefix string
	// EtcdCACert, EtcdCert and EtcdKey are TLS files for etcd ("": none).
	EtcdCACert, EtcdCert, EtcdKey string
	// Node is the program's name in the fleet: it takes the objects of its
	// own scope, and its status is kept under it. Two live nodes may not
	// share one.
	Node string
	// StatusTTL is the lease of the node's status in etcd: it disappears
	// this long after the node stopped without revoking it (a crash), and
	// the node is listed as lost until `fleet forget`.
	StatusTTL time.Duration
	// ObjectStatus makes the node keep one status key per object in etcd
	// beside its summary (off by default: N nodes × M objects keys).
	ObjectStatus bool
}

// DefaultStatusTTL is Config.StatusTTL's default.
const DefaultStatusTTL = 10 * time.Second

// ConfigCell declares Config's flags with DefaultConfig: include it once,
// outside the condition that adds Cell (cell.When needs it).
var ConfigCell = cell.Config(DefaultConfig())

// DefaultConfig is fleet mode off, the default prefix, the host's name as
// the node's, and DefaultStatusTTL.
func DefaultConfig() Config {
	return Config{EtcdPrefix: etcd.DefaultPrefix, Node: defaultNode(), StatusTTL: DefaultStatusTTL}
}

// defaultNode is --node's default: the host's name.
func defaultNode() string {
	h, _ := os.Hostname()
	return cmp.Or(strings.TrimSpace(h), "localhost")
}

// Flags implements cell.Flagger.
func (def Config) Flags(fs *pflag.FlagSet) {
	fs.StringSlice("etcd-endpoints", def.EtcdEndpoints, "fleet mode: take the desired state from the etcd cluster at these endpoints (HOST:PORT or URL, comma-separated)")
	fs.String("etcd-prefix", def.EtcdPrefix, "key prefix of the fleet in etcd")
	fs.String("etcd-cacert", def.EtcdCACert, "CA certificate file to verify the etcd servers (TLS)")
	fs.String("etcd-cert", def.EtcdCert, "client certificate file for etcd (TLS)")
	fs.String("etcd-key", def.EtcdKey, "client key file for etcd (TLS)")
	fs.String("node", def.Node, "fleet mode: this node's name (its own desired objects, its status); two live nodes may not share one")
	fs.Duration("status-ttl", def.StatusTTL, "fleet mode: how long the node's status outlives a node that died without leaving (then the node is lost)")
	fs.Bool("object-status", def.ObjectStatus, "fleet mode: also keep each object's status in etcd (`fleet status --objects` shows them)")
}

// Validate implements the hive's config check (only in fleet mode).
func (c Config) Validate() error {
	if !c.Enabled() {
		return nil
	}
	switch {
	case c.Node == "" || strings.ContainsAny(c.Node, "/\x00") || strings.ContainsFunc(c.Node, unicode.IsControl):
		return fmt.Errorf("--node: a node name without '/' or control characters is required in fleet mode, got %q", c.Node)
	case c.StatusTTL < 2*time.Second:
		return fmt.Errorf("--status-ttl: must be at least 2s, got %v", c.StatusTTL)
	}
	return nil
}

// Enabled tells whether fleet mode is on (--etcd-endpoints given).
func (c Config) Enabled() bool { return len(c.EtcdEndpoints) > 0 }

// ClientOptions are the etcd options of the config.
func (c Config) ClientOptions() etcd.ClientOptions {
	return etcd.ClientOptions{Endpoints: c.EtcdEndpoints, Prefix: c.EtcdPrefix, CACert: c.EtcdCACert, Cert: c.EtcdCert, Key: c.EtcdKey}
}
