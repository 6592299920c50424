package fleetcell_test

import (
	"net/url"
	"testing"

	"github.com/steadystate/steadystate/etcd/fleetcell"
)

// FuzzObjectName holds ObjectName to url.PathEscape's text, which names in
// etcd have always been: any other byte for a key would be another name.
func FuzzObjectName(f *testing.F) {
	for _, s := range []string{"", "net.ipv4.ip_forward", "254/10.0.0.0/24/0", "100/2001:db8::/32/1024", "filter/INPUT/rule 1", "a%2Fb", "ü?;,#", "$&+:=@-_.~"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if got, want := fleetcell.ObjectName(key), url.PathEscape(key); got != want {
			t.Fatalf("ObjectName(%q) = %q, want url.PathEscape's %q", key, got, want)
		}
	})
}
