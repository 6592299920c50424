package fleetcmd

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/steadystate/steadystate/etcd"
	"github.com/steadystate/steadystate/etcd/etcdtest"
)

// testTables are the tables of the tests' program.
var testTables = []string{"sysctls", "routes", "rules"}

// testConfig is the command set of a program whose desired file has a line
// "TABLE NAME VALUE" per object (no spaces within).
var testConfig = Config{Tables: testTables, Decode: decodeLines, Program: "test"}

func decodeLines(path string, data []byte) (map[string]map[string][]byte, error) {
	out := map[string]map[string][]byte{}
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || !slices.Contains(testTables, f[0]) {
			return nil, fmt.Errorf("%s:%d: want TABLE NAME VALUE with a table of %v, have %q", path, i+1, testTables, line)
		}
		if out[f[0]] == nil {
			out[f[0]] = map[string][]byte{}
		}
		out[f[0]][f[1]] = []byte(f[2])
	}
	for _, t := range testTables {
		if out[t] == nil {
			out[t] = map[string][]byte{}
		}
	}
	return out, nil
}

// desiredTables is a desired file's objects as `fleet apply` writes them.
func desiredTables(t *testing.T, file string) map[string]map[string][]byte {
	t.Helper()
	objs, err := decodeLines("test", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// fleetState reads the three tables' objects in force fleet-wide, at one
// revision.
func fleetState(t *testing.T, c *clientv3.Client, l etcd.Layout) map[string]map[string][]byte {
	t.Helper()
	resp, err := c.Get(t.Context(), l.Root()+"desired/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string][]byte{}
	for _, kv := range resp.Kvs {
		keys[string(kv.Key)] = kv.Value
	}
	out := map[string]map[string][]byte{}
	for _, table := range testTables {
		out[table] = map[string][]byte{}
		gen, ok := keys[l.Current(table, etcd.ScopeAll)]
		if !ok {
			continue
		}
		prefix := l.Generation(table, etcd.ScopeAll, string(gen))
		for k, v := range keys {
			if name, ok := strings.CutPrefix(k, prefix); ok {
				out[table][name] = v
			}
		}
	}
	return out
}

func sameTables(a, b map[string]map[string][]byte) bool {
	return maps.EqualFunc(a, b, func(x, y map[string][]byte) bool {
		return maps.EqualFunc(x, y, func(v, w []byte) bool { return string(v) == string(w) })
	})
}

// Two files that differ from the start's in different tables: one
// changes a sysctl only, the other adds a route only.
const (
	raceStart = `
sysctls net.ipv4.ip_forward 1
routes 192.0.2.0%2F24 blackhole
rules filter%2FINPUT%2Fallow-ssh accept
`
	raceSysctl = `
sysctls net.ipv4.ip_forward 0
routes 192.0.2.0%2F24 blackhole
rules filter%2FINPUT%2Fallow-ssh accept
`
	raceRoute = `
sysctls net.ipv4.ip_forward 1
routes 192.0.2.0%2F24 blackhole
routes 203.0.113.0%2F24 unreachable
rules filter%2FINPUT%2Fallow-ssh accept
`
)

// Two `fleet apply` of different files at once (applyWhole, from two
// clients), round after round from the same start: each ends with its
// file in force at the revision it returns, retrying on a conflict, and
// etcd holds exactly the file of the later one, never the sysctl of one
// with the routes of the other.
func TestFleetApplyRace(t *testing.T) {
	cl := etcdtest.StartCluster(t, etcdtest.Binary(t), 1)
	c := cl.Client()
	clients := []*clientv3.Client{cl.Client(), cl.Client()}
	l := etcd.Layout{Prefix: "/applyrace"}
	start := desiredTables(t, raceStart)
	files := []map[string]map[string][]byte{desiredTables(t, raceSysctl), desiredTables(t, raceRoute)}
	retries := 0
	for round := range 40 {
		if _, err := etcd.ApplyTables(t.Context(), c, l, etcd.ScopeAll, start); err != nil {
			t.Fatal(err)
		}
		revs, errs, tries := make([]int64, 2), make([]error, 2), make([]int, 2)
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Go(func() {
				revs[i], tries[i], errs[i] = applyWhole(t.Context(), clients[i], l, etcd.ScopeAll, files[i], func(int, error) {})
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		retries += tries[0] + tries[1]
		last := 0
		if revs[1] > revs[0] {
			last = 1
		}
		if got := fleetState(t, c, l); !sameTables(got, files[last]) {
			t.Fatalf("round %d: etcd holds %q; want the file applied last (revisions %v): %q", round, got, revs, files[last])
		}
	}
	t.Logf("40 rounds of two concurrent applies: %d retries", retries)
}

// retryKV runs between after every read of ApplyTables (its first
// transaction, then every second: the in-place path reads, then commits).
type retryKV struct {
	clientv3.KV
	mu      sync.Mutex
	txns    int
	between func(n int)
}

func (k *retryKV) Txn(ctx context.Context) clientv3.Txn { return &retryTxn{Txn: k.KV.Txn(ctx), k: k} }

type retryTxn struct {
	clientv3.Txn
	k *retryKV
}

func (t *retryTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { t.Txn = t.Txn.If(cs...); return t }
func (t *retryTxn) Then(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Then(ops...); return t }
func (t *retryTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }
func (t *retryTxn) Commit() (*clientv3.TxnResponse, error) {
	resp, err := t.Txn.Commit()
	t.k.mu.Lock()
	t.k.txns++
	n := t.k.txns
	t.k.mu.Unlock()
	if n%2 == 1 {
		t.k.between((n + 1) / 2)
	}
	return resp, err
}

// A conflict is retried, and said: another apply lands between the read
// and the commit once (one retry, the file in force whole), or every time
// (it gives up after 3 retries, nothing of the file in force).
func TestFleetApplyRetries(t *testing.T) {
	cl := etcdtest.StartCluster(t, etcdtest.Binary(t), 1)
	c := cl.Client()
	start, mine, other := desiredTables(t, raceStart), desiredTables(t, raceSysctl), desiredTables(t, raceRoute)
	for _, tc := range []struct {
		conflicts int // reads followed by another apply
		retries   int
		ok        bool
	}{
		{0, 0, true},
		{1, 1, true},
		{3, 3, true},
		{4, 3, false},
	} {
		t.Run(fmt.Sprintf("%d conflicts", tc.conflicts), func(t *testing.T) {
			l := etcd.Layout{Prefix: "/retries/" + t.Name()}
			if _, err := etcd.ApplyTables(t.Context(), c, l, etcd.ScopeAll, start); err != nil {
				t.Fatal(err)
			}
			w := cl.Client()
			w.KV = &retryKV{KV: w.KV, between: func(n int) {
				if n > tc.conflicts {
					return
				}
				// Alternately the other file and the start: always a change.
				state := other
				if n%2 == 0 {
					state = start
				}
				if _, err := etcd.ApplyTables(t.Context(), c, l, etcd.ScopeAll, state); err != nil {
					t.Error(err)
				}
			}}
			var said []int
			rev, retries, err := applyWhole(t.Context(), w, l, etcd.ScopeAll, mine, func(attempt int, err error) {
				if !errors.Is(err, etcd.ErrConflict) {
					t.Errorf("retry %d after %v", attempt, err)
				}
				said = append(said, attempt)
			})
			if retries != tc.retries || len(said) != tc.retries || (err == nil) != tc.ok {
				t.Fatalf("%d retries (said %v), %v; want %d, ok %v", retries, said, err, tc.retries, tc.ok)
			}
			got := fleetState(t, c, l)
			if tc.ok {
				if !sameTables(got, mine) || rev == 0 {
					t.Fatalf("in force at %d: %q, want the file", rev, got)
				}
				return
			}
			if !errors.Is(err, etcd.ErrConflict) || !strings.Contains(err.Error(), "gave up after 3 retries") || sameTables(got, mine) {
				t.Fatalf("gave up: %v; etcd holds %q", err, got)
			}
		})
	}
	for n, want := range map[int]string{0: " (first try)", 1: " (after 1 retry: another apply came first)", 3: " (after 3 retries: other applies came first)"} {
		if got := retried(n); got != want {
			t.Errorf("retried(%d) = %q, want %q", n, got, want)
		}
	}
}
