package etcd

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ClientOptions say how to reach a fleet's etcd: the flags
// --etcd-endpoints, --etcd-prefix, --etcd-cacert, --etcd-cert and
// --etcd-key, shared by the node's cell (fleetcell) and the operator's
// commands (fleetcmd).
type ClientOptions struct {
	Endpoints         []string
	Prefix            string
	CACert, Cert, Key string
}

// Flags declares the options on fs, with o's values as defaults.
func (o *ClientOptions) Flags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&o.Endpoints, "etcd-endpoints", o.Endpoints, "etcd endpoints, HOST:PORT or URL, comma-separated")
	fs.StringVar(&o.Prefix, "etcd-prefix", o.Prefix, "key prefix of the fleet's desired state and statuses in etcd")
	fs.StringVar(&o.CACert, "etcd-cacert", o.CACert, "CA certificate file to verify the etcd servers (TLS)")
	fs.StringVar(&o.Cert, "etcd-cert", o.Cert, "client certificate file for etcd (TLS)")
	fs.StringVar(&o.Key, "etcd-key", o.Key, "client key file for etcd (TLS)")
}

// Layout is the key layout under the prefix (DefaultPrefix if unset).
func (o ClientOptions) Layout() Layout { return Layout{Prefix: o.Prefix} }

// Client returns a client of the endpoints. It does not wait for a
// connection: requests fail (and a reflector retries) while the cluster is
// unreachable. A dead or paused member is noticed within a few seconds
// (keep-alives every 2s) and another one used.
func (o ClientOptions) Client() (*clientv3.Client, error) {
	if len(o.Endpoints) == 0 {
		return nil, errors.New("--etcd-endpoints: give the etcd cluster's endpoints (HOST:PORT,...)")
	}
	var tlsConfig *tls.Config
	if o.CACert != "" || o.Cert != "" || o.Key != "" {
		if (o.Cert == "") != (o.Key == "") {
			return nil, errors.New("--etcd-cert and --etcd-key: give both or neither")
		}
		info := transport.TLSInfo{CertFile: o.Cert, KeyFile: o.Key, TrustedCAFile: o.CACert}
		var err error
		if tlsConfig, err = info.ClientConfig(); err != nil {
			return nil, fmt.Errorf("etcd TLS: %w", err)
		}
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints: o.Endpoints, TLS: tlsConfig, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialKeepAliveTime: 2 * time.Second, DialKeepAliveTimeout: 2 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client for %s: %w", strings.Join(o.Endpoints, ","), err)
	}
	return c, nil
}
