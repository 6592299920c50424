package main

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/steadystate/steadystate/examples/netnstest"
)

// One edit of a large desired file, from the rename of the new version
// into place to the kernel: BenchmarkEdit measures it at 50,000 routes and
// 10,000 rules (5,000 and 1,000 with -short; make bench-check holds the
// mean to 100 ms), TestEditBrokenLine checks
// that a version with one broken line is rejected whole, naming the line,
// and changes nothing.

// editNode is a restartNode whose desired file is edited one route at a
// time: edit i moves route i from 10.x.y.0/24 to 11.x.y.0/24.
type editNode struct {
	*restartNode
	data  []byte // the desired file as last written
	edits int
}

func newEditNode(tb testing.TB, n, m int) *editNode {
	tb.Helper()
	netnstest.RequireRoot(tb)
	netnstest.RequireCommand(tb, "iptables-restore")
	s := &restartNode{tb: tb, bin: buildAgent(tb), ns: netnstest.New(tb), state: tb.TempDir(), routes: n, rules: m}
	s.desired = filepath.Join(tb.TempDir(), "desired.yaml")
	data := restartDesired(n, m)
	if err := os.WriteFile(s.desired, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	// The agent's own prune and reload intervals and settle time (the
	// tests' are short): a rename into place is read at once.
	s.agent = startAgent(tb, s.bin, s.desired, s.ns, "--netns", filepath.Base(string(s.ns)), "--state-dir", s.state,
		"--prune-interval", defaultConfig().PruneInterval.String(), "--reload-interval", defaultConfig().ReloadInterval.String(),
		"--settle-time", defaultConfig().SettleTime.String())
	deadline := time.Now().Add(2 * time.Minute)
	for {
		r, err := s.agent.status()
		if err == nil {
			if err = allDone(r, map[string]int{"sysctls": len(restartSysctls), "routes": n, "iptables-rules": m}); err == nil {
				// And the first prune done, which would hold up an edit.
				if err = s.pruned(); err == nil {
					break
				}
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("not every object Done within 2 minutes: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return &editNode{restartNode: s, data: data}
}

// editPrefixes are route i's prefix before and after its edit.
func editPrefixes(i int) (before, after netip.Prefix) {
	return netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.0/24", i>>8, i&0xff)),
		netip.MustParsePrefix(fmt.Sprintf("11.%d.%d.0/24", i>>8, i&0xff))
}

// next returns the desired file with the next route edited, and the
// route's prefixes before and after.
func (e *editNode) next() (data []byte, before, after netip.Prefix) {
	e.tb.Helper()
	if e.edits >= e.routes {
		e.tb.Fatalf("edited all %d routes", e.routes)
	}
	before, after = editPrefixes(e.edits)
	data = bytes.Replace(e.data, []byte("prefix: "+before.String()+"\n"), []byte("prefix: "+after.String()+"\n"), 1)
	if bytes.Equal(data, e.data) {
		e.tb.Fatalf("no route %s in the desired file", before)
	}
	return data, before, after
}

// edit writes the next edit (a temporary file renamed into place) and
// returns the time from the rename to the new route's notification in the
// agent's namespace; then it waits until the old route is gone and every
// object is Done.
func (e *editNode) edit() time.Duration {
	e.tb.Helper()
	data, before, after := e.next()
	tmp := e.desired + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		e.tb.Fatal(err)
	}
	w := e.watchRoutes()
	defer w.stop()
	start := time.Now()
	if err := os.Rename(tmp, e.desired); err != nil {
		e.tb.Fatal(err)
	}
	seen := w.await(routeEvent{unix.RTM_NEWROUTE, after}, routeEvent{unix.RTM_DELROUTE, before})
	took := seen[0] - start.Sub(w.start)
	e.data = data
	e.edits++
	waitFor(e.tb, "every object Done after the edit", func() error {
		r, err := e.agent.status()
		if err != nil {
			return err
		}
		return allDone(r, map[string]int{"sysctls": len(restartSysctls), "routes": e.routes, "iptables-rules": e.rules})
	})
	return took
}

// editWatch receives the route notifications of a namespace.
type editWatch struct {
	tb      testing.TB
	start   time.Time
	updates chan netlink.RouteUpdate
	done    chan struct{}
}

func (e *editNode) watchRoutes() *editWatch {
	e.tb.Helper()
	h, err := netns.GetFromPath(string(e.ns))
	if err != nil {
		e.tb.Fatal(err)
	}
	defer h.Close()
	w := &editWatch{tb: e.tb, updates: make(chan netlink.RouteUpdate, 1024), done: make(chan struct{})}
	err = netlink.RouteSubscribeWithOptions(w.updates, w.done, netlink.RouteSubscribeOptions{Namespace: &h, ReceiveBufferSize: 1 << 20})
	if err != nil {
		e.tb.Fatal(err)
	}
	w.start = time.Now()
	return w
}

// routeEvent is a route notification: its type and prefix.
type routeEvent struct {
	typ    uint16
	prefix netip.Prefix
}

// await waits (up to a minute) for a notification of each of want, in any
// order, and returns when each came, from the watch's start.
func (w *editWatch) await(want ...routeEvent) []time.Duration {
	w.tb.Helper()
	deadline := time.After(time.Minute)
	at := make([]time.Duration, len(want))
	for left := len(want); left > 0; {
		select {
		case u, ok := <-w.updates:
			if !ok {
				w.tb.Fatalf("route notifications ended while waiting for %v", want)
			}
			if u.Dst == nil {
				continue
			}
			for i, ev := range want {
				if at[i] == 0 && u.Type == ev.typ && u.Dst.String() == ev.prefix.String() {
					at[i] = time.Since(w.start)
					left--
				}
			}
		case <-deadline:
			w.tb.Fatalf("not all of the route notifications %v within a minute (seen at %v)", want, at)
		}
	}
	return at
}

func (w *editWatch) stop() {
	close(w.done)
	for range w.updates {
	}
}

// BenchmarkEdit measures one-route edits of a large desired file: edit-ms
// is the mean time from the rename of the new version into place to the
// route's notification in the agent's namespace, edit-max-ms the longest,
// edit-first-ms the first edit's after the start (not in the mean).
// -short runs the small size only.
func BenchmarkEdit(b *testing.B) {
	for _, size := range [][2]int{{5_000, 1_000}, {50_000, 10_000}} {
		b.Run(fmt.Sprintf("routes=%d/rules=%d", size[0], size[1]), func(b *testing.B) {
			if testing.Short() && size[0] > 5_000 {
				b.Skip("-short: the large size only in a full run")
			}
			e := newEditNode(b, size[0], size[1])
			// The first edit after the start is reported on its own
			// (edit-first-ms): the agent has just applied everything (its
			// prunes and the collector may still run), and the first
			// edit indexes the entry cache by name (filecache.go; made
			// with the start's fill, the index raised the start's peak
			// RSS by 10-24 MB).
			first := e.edit()
			var total, longest time.Duration
			n := 0
			for b.Loop() {
				took := e.edit()
				total += took
				longest = max(longest, took)
				n++
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(n), "edit-ms")
			b.ReportMetric(float64(longest.Microseconds())/1000, "edit-max-ms")
			b.ReportMetric(float64(first.Microseconds())/1000, "edit-first-ms")
		})
	}
}

// TestEditBrokenLine edits the desired file of an agent over 45,000
// routes and 5,000 rules (50,000 objects) and then writes a version with
// one route edited and one broken line: it is rejected whole, the health
// names the file and the line, and nothing is written to the kernel.
func TestEditBrokenLine(t *testing.T) {
	n, m := 45_000, 5_000
	if testing.Short() {
		n, m = 4_500, 500
	}
	e := newEditNode(t, n, m)
	took := e.edit()
	t.Logf("one edit at %d routes and %d rules: %v", n, m, took)

	data, _, _ := e.next()
	// Route 7's type misspelled: the error names its entry's line.
	_, line7 := findLine(t, data, "prefix: 10.0.7.0/24")
	bad := bytes.Replace(data, []byte("prefix: 10.0.7.0/24\n    type: blackhole\n"), []byte("prefix: 10.0.7.0/24\n    type: blackhol\n"), 1)
	if bytes.Equal(bad, data) {
		t.Fatal("no route 10.0.7.0/24 to break")
	}
	w := netnstest.WatchWrites(t, e.ns)
	if err := writeFile(t, e.desired, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("line %d: routes[7]: ", line7)
	waitFor(t, "Degraded health naming the line", func() error {
		r, err := e.agent.status()
		if err != nil {
			return err
		}
		h, ok := findHealth(healthLike(r.Health), "agent.desired.desired-file")
		if !ok || h.Level != "Degraded" || !strings.Contains(h.Error, want) || !strings.Contains(h.Message, e.desired) {
			return fmt.Errorf("health of the desired file: %+v, want Degraded naming %s and %q", h, e.desired, want)
		}
		return nil
	})
	if routes, nft := w.Stop(); len(routes) > 0 || len(nft) > 0 {
		t.Errorf("a rejected version wrote to the kernel: routes %q, nf_tables %q", routes, nft)
	}
	r, err := e.agent.status()
	if err != nil {
		t.Fatal(err)
	}
	if err := allDone(r, map[string]int{"sysctls": len(restartSysctls), "routes": n, "iptables-rules": m}); err != nil {
		t.Error(err)
	}
}

// findLine returns the text and the number (from 1) of the first line of
// data that contains s.
func findLine(t *testing.T, data []byte, s string) (string, int) {
	t.Helper()
	for i, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, s) {
			return l, i + 1
		}
	}
	t.Fatalf("no line with %q", s)
	return "", 0
}
