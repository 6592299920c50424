package etcd

import "testing"

// Progress is requested only from etcd servers that send it after the
// events before it and answer it once caught up.
func TestOrderedProgress(t *testing.T) {
	for _, tc := range []struct {
		version string
		want    bool
	}{
		{"3.3.27", false},
		{"3.4.23", false}, // Debian's: out of order (etcd issue 15220)
		{"3.4.25", false}, // ordered, but may never answer (etcd issue 17507)
		{"3.4.31", true},
		{"3.4.40", true},
		{"3.5.8", false},
		{"3.5.12", false},
		{"3.5.13", true},
		{"3.5.21", true},
		{"3.6.0", true},
		{"3.6.0-alpha.0", true},
		{"3.7.3", true},
		{"4.0.0", true},
		{"2.3.8", false},
		{"3.6", false}, // not a server's version: unknown is unsafe
		{"", false},
		{"garbage", false},
	} {
		if got := orderedProgress(tc.version); got != tc.want {
			t.Errorf("orderedProgress(%q) = %v, want %v", tc.version, got, tc.want)
		}
	}
}
