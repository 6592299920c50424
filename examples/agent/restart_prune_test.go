package main

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/steadystate/steadystate/examples/netnstest"
	"github.com/steadystate/steadystate/examples/netnsutil"
)

// ownRoutes lists the routes of the agent's protocol in every table and
// both families, one line each ("10.1.0.0/24 table 100").
func ownRoutes(t *testing.T, ns netnsutil.NS) []string {
	t.Helper()
	var out []string
	for _, fam := range []string{"-4", "-6"} {
		b, err := ns.Command("ip", fam, "route", "show", "table", "all", "proto", "254")
		if err != nil {
			t.Fatal(err)
		}
		for l := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
			f := strings.Fields(l)
			if len(f) < 2 {
				continue
			}
			table := "main"
			for i := range f[:len(f)-1] {
				if f[i] == "table" {
					table = f[i+1]
				}
			}
			out = append(out, f[1]+" table "+table)
		}
	}
	sort.Strings(out)
	return out
}

// An earlier run's routes that are no longer desired are removed by a
// restarted agent (after SIGTERM and after SIGKILL), in any table and
// either family, although the agent keeps no record of the routes it
// applied (the kernel's protocol mark is all the prune goes by); the
// status counts them as pruned, and the record holds no routes.
func TestRestartPrunesEarlierRoutes(t *testing.T) {
	netnstest.RequireRoot(t)
	netnstest.RequireCommand(t, "iptables-restore")
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			bin := buildAgent(t)
			ns := netnstest.New(t)
			name := filepath.Base(string(ns))
			state := t.TempDir()
			desired := filepath.Join(t.TempDir(), "desired.yaml")
			all := "routes:\n" +
				"  - prefix: 10.1.0.0/24\n    type: blackhole\n" +
				"  - prefix: 10.2.0.0/24\n    type: blackhole\n    table: 100\n" +
				"  - prefix: 2001:db8:1::/64\n    type: blackhole\n    table: 101\n"
			if err := writeFile(t, desired, []byte(all), 0o644); err != nil {
				t.Fatal(err)
			}
			a := startAgent(t, bin, desired, ns, "--netns", name, "--state-dir", state)
			waitFor(t, "three routes Done", func() error {
				r, err := a.status()
				if err != nil {
					return err
				}
				return allDone(r, map[string]int{"routes": 3})
			})
			want := []string{"10.1.0.0/24 table main", "10.2.0.0/24 table 100", "2001:db8:1::/64 table 101"}
			if got := ownRoutes(t, ns); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("routes after the first run: %q, want %q", got, want)
			}
			if err := a.stop(sig); err != nil && sig != syscall.SIGKILL {
				t.Fatal(err)
			}
			if got := ownRoutes(t, ns); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("routes after %v: %q, want them left in place %q", sig, got, want)
			}

			// The next run desires one of them only.
			if err := writeFile(t, desired, []byte("routes:\n  - prefix: 10.1.0.0/24\n    type: blackhole\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			a = startAgent(t, bin, desired, ns, "--netns", name, "--state-dir", state)
			waitFor(t, "the earlier run's routes pruned", func() error {
				r, err := a.status()
				if err != nil {
					return err
				}
				if err := allDone(r, map[string]int{"routes": 1}); err != nil {
					return err
				}
				for _, ts := range r.Tables {
					if ts.Name == "routes" && ts.Pruned != 2 {
						return fmt.Errorf("routes pruned: %d, want 2", ts.Pruned)
					}
				}
				if got := ownRoutes(t, ns); len(got) != 1 || got[0] != "10.1.0.0/24 table main" {
					return fmt.Errorf("routes of the agent's protocol: %q", got)
				}
				return nil
			})
			if err := a.stop(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			rec, err := openState(state)
			if err != nil {
				t.Fatal(err)
			}
			defer rec.db.Close()
			if m, err := rec.applied("routes"); err != nil || len(m) != 0 {
				t.Errorf("the record holds %d routes (%v), want none", len(m), err)
			}
		})
	}
}
