package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/steadystate/steadystate/examples/netnstest"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// --netns is checked when the hive is built; a named namespace that does
// not exist fails the start.
func TestNamespaceChoice(t *testing.T) {
	for _, tc := range []struct {
		netns, wantPath, wantErr, wantStartErr string
	}{
		{netns: "", wantErr: "must be"},
		{netns: "..", wantErr: "must be"},
		{netns: "no-such-ns", wantPath: "/var/run/netns/no-such-ns", wantStartErr: "no such network namespace"},
		{netns: "/proc/self/ns/net", wantPath: "/proc/self/ns/net"},
	} {
		var lc hookList
		ns, err := newNamespace(AgentConfig{NetNS: tc.netns}, &lc, discard)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("--netns %q: %v, want an error with %q", tc.netns, err, tc.wantErr)
			}
			continue
		}
		if err != nil || ns.Path != tc.wantPath || ns.Reexec {
			t.Errorf("--netns %q: %+v, %v; want path %q", tc.netns, ns, err, tc.wantPath)
			continue
		}
		err = lc.start(context.Background())
		if tc.wantStartErr == "" && err != nil || tc.wantStartErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantStartErr)) {
			t.Errorf("--netns %q: start %v, want %q", tc.netns, err, tc.wantStartErr)
		}
	}
}

// The sandbox of a root agent is made at start and removed at stop, not
// when the hive is built.
func TestNamespaceSandbox(t *testing.T) {
	netnstest.RequireRoot(t)
	var lc hookList
	ns, err := newNamespace(AgentConfig{NetNS: netnsSandbox}, &lc, discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ns.Path); !os.IsNotExist(err) {
		t.Fatalf("the sandbox %s exists before the start: %v", ns.Path, err)
	}
	if err := lc.start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ns.Path); err != nil {
		t.Fatalf("the sandbox was not made at start: %v", err)
	}
	if err := lc.stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ns.Path); !os.IsNotExist(err) {
		t.Fatalf("the sandbox %s is left after the stop: %v", ns.Path, err)
	}
	if _, err := newNamespace(AgentConfig{NetNS: netnsHost}, &lc, discard); err != nil {
		t.Fatalf("--netns host as root: %v", err)
	}
}
