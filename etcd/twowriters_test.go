package etcd_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/steadystate/steadystate/etcd"
)

// nodeSnap is what a node held at one moment: its tables, and a revision
// it claimed no later than that (read before the tables, or, in a commit
// hook, the claim before the commit).
type nodeSnap struct {
	claimed uint64
	tables  map[string]map[string]string
}

// history is every state etcd held for a node, by the revision it went
// into force at, in order.
type history struct {
	mu     sync.Mutex
	revs   []int64
	states []map[string]map[string]string
}

func (h *history) add(rev int64, state map[string]map[string]string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	i, _ := slices.BinarySearch(h.revs, rev)
	h.revs = slices.Insert(h.revs, i, rev)
	h.states = slices.Insert(h.states, i, state)
}

// check says what is wrong with s, if anything: the tables must hold the
// state etcd held at the revision claimed, or one that went into force
// after it (the claim lags the commit); anything else is a mix or a claim
// of a revision whose state the node does not hold.
func (h *history) check(s nodeSnap) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	at := -1 // the state in force at the claim
	for i, rev := range h.revs {
		if rev <= int64(s.claimed) {
			at = i
		}
	}
	if at >= 0 && sameState(s.tables, h.states[at]) {
		return nil
	}
	for i := max(at+1, 0); i < len(h.revs); i++ {
		if sameState(s.tables, h.states[i]) {
			return nil
		}
	}
	for i := range h.revs {
		if sameState(s.tables, h.states[i]) {
			return fmt.Errorf("claims revision %d but holds the state of revision %d", s.claimed, h.revs[i])
		}
	}
	return fmt.Errorf("at claimed revision %d holds a state etcd never held: %s", s.claimed, samples(s.tables))
}

// samples is a short form of every table for a message.
func samples(tables map[string]map[string]string) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(tables)) {
		fmt.Fprintf(&b, "%s %s; ", name, sample(tables[name]))
	}
	return strings.TrimSuffix(b.String(), "; ")
}

// filled returns tables ta and tb with n objects each, of the values given.
func filled(n int, ta, tb string) map[string]map[string][]byte {
	return tablesOf("ta", objects(n, ta), "tb", objects(n, tb))
}

// Two operators apply different files to one scope at once, round after
// round, each reading again and retrying on ErrConflict as `agent fleet
// apply` does: from a common base, writer 1 changes only table ta, writer
// 2 only table tb, so a mix (ta of one, tb of the other) is a state
// neither applied. A node reflects the scope with one Multi of small
// batches. After every commit of the node, and whenever another goroutine
// looks, its tables hold exactly a state etcd held (never a mix), and its
// Revision never claims a revision whose state it does not hold; at the
// end of each round it reaches DesiredRevision holding the state in force,
// which is the file of the writer whose apply returned the later
// revision. In place (3 objects a table) and staged (200).
func TestTwoWritersNodeNeverMixed(t *testing.T) {
	cl := startServer(t)
	for _, size := range []int{3, 200} {
		t.Run(fmt.Sprintf("%d objects a table", size), func(t *testing.T) {
			c, w1, w2 := cl.Client(), cl.Client(), cl.Client()
			ctx := ctxT(t)
			l := etcd.Layout{Prefix: fmt.Sprintf("/twowriters/%d", size)}
			h := &history{}
			h.add(0, map[string]map[string]string{"ta": {}, "tb": {}}) // before the node's first list
			apply := func(c *clientv3.Client, file map[string]map[string][]byte) (int64, int, error) {
				for attempt := 0; ; attempt++ {
					rev, err := etcd.ApplyTables(ctx, c, l, etcd.ScopeAll, file)
					if err == nil {
						h.add(rev, asStrings(file))
					}
					if !errors.Is(err, etcd.ErrConflict) || attempt == 3 {
						return rev, attempt, err
					}
				}
			}
			if _, _, err := apply(c, filled(size, "base0", "base0")); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var snaps []nodeSnap
			var n *multiNode
			node := startMultiNode(t, c, l, "n1", 10, func() {
				mu.Lock()
				defer mu.Unlock()
				if n != nil {
					snaps = append(snaps, nodeSnap{claimed: n.multi.Revision(), tables: n.contents()})
				}
			}, "ta", "tb")
			mu.Lock()
			n = node
			mu.Unlock()
			stop := make(chan struct{})
			var readers sync.WaitGroup
			readers.Go(func() {
				for {
					claimed, moved := n.multi.RevisionWatch()
					s := nodeSnap{claimed: claimed, tables: n.contents()}
					mu.Lock()
					snaps = append(snaps, s)
					mu.Unlock()
					select {
					case <-moved:
					case <-stop:
						return
					}
				}
			})
			retries := 0
			for round := 1; round <= 25; round++ {
				base := fmt.Sprintf("base%d", round)
				if _, _, err := apply(c, filled(size, base, base)); err != nil {
					t.Fatal(err)
				}
				files := []map[string]map[string][]byte{
					filled(size, fmt.Sprintf("w1r%d", round), base),
					filled(size, base, fmt.Sprintf("w2r%d", round)),
				}
				revs, errs, tries := make([]int64, 2), make([]error, 2), make([]int, 2)
				var wg sync.WaitGroup
				for i, wc := range []*clientv3.Client{w1, w2} {
					wg.Go(func() { revs[i], tries[i], errs[i] = apply(wc, files[i]) })
				}
				wg.Wait()
				if errs[0] != nil || errs[1] != nil {
					t.Fatalf("round %d: %v; %v", round, errs[0], errs[1])
				}
				retries += tries[0] + tries[1]
				last := 0
				if revs[1] > revs[0] {
					last = 1
				}
				if got := tablesState(t, c, l, etcd.ScopeAll, "ta", "tb"); !sameState(got, asStrings(files[last])) {
					t.Fatalf("round %d: etcd holds ta %s, tb %s; want writer %d's file (revisions %v)",
						round, sample(got["ta"]), sample(got["tb"]), last+1, revs)
				}
				desired, err := etcd.DesiredRevision(ctx, c, l, []string{"ta", "tb"}, "n1")
				if err != nil || desired != max(revs[0], revs[1]) {
					t.Fatalf("round %d: DesiredRevision %d, %v; want the later apply's %d", round, desired, err, max(revs[0], revs[1]))
				}
				n.waitRevision(t, desired, 10*time.Second)
				if got := n.contents(); !sameState(got, asStrings(files[last])) {
					t.Fatalf("round %d: the node at revision %d holds ta %s, tb %s; want writer %d's file",
						round, n.multi.Revision(), sample(got["ta"]), sample(got["tb"]), last+1)
				}
			}
			close(stop)
			readers.Wait()
			mu.Lock()
			defer mu.Unlock()
			bad := 0
			for _, s := range snaps {
				if err := h.check(s); err != nil {
					if bad++; bad <= 5 {
						t.Errorf("the node %v", err)
					}
				}
			}
			if bad > 0 {
				t.Fatalf("%d of %d looks at the node were wrong", bad, len(snaps))
			}
			t.Logf("25 rounds: %d conflicts retried, %d looks at the node, all right", retries, len(snaps))
		})
	}
}
