package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/steadystate/steadystate/examples/iptables"
	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
	"github.com/steadystate/steadystate/statedb"
)

// recObj is an object for the record tests.
type recObj struct {
	Name string `json:"name"`
}

// A restarted agent removes what an earlier run applied and is no longer
// desired, with the target's Delete, even when the target's Prune cannot
// tell it is its own; and forgets it only once it is gone.
func TestRecordPrunesEarlierRun(t *testing.T) {
	rec := testRecord(t)
	key := func(o *recObj) index.Key { return index.Key(o.Name) }
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()

	// An earlier run applied a and b.
	earlier := reconcilertest.NewTarget(func(o *recObj) string { return o.Name })
	wrapped := recordTarget[*recObj](earlier, rec, "objs", key, nil, log)
	for _, n := range []string{"a", "b"} {
		if err := wrapped.Update(ctx, nil, &recObj{Name: n}); err != nil {
			t.Fatal(err)
		}
	}

	// This run's target knows nothing of them (a new process): its Prune
	// removes nothing it does not see. Only a is desired now.
	now := reconcilertest.NewTarget(func(o *recObj) string { return o.Name })
	now.SetState("b", &recObj{Name: "b"}) // b is still in the real system
	now.Inject("b", reconcilertest.Fault{Times: 1})
	wrapped = recordTarget[*recObj](now, rec, "objs", key, nil, log)
	desired := func(yield func(*recObj, statedb.Revision) bool) { yield(&recObj{Name: "a"}, 1) }
	if err := wrapped.Prune(ctx, nil, desired); err == nil {
		t.Fatal("a prune whose Delete of b failed reported no error")
	}
	if m, _ := rec.applied("objs"); len(m) != 2 {
		t.Fatalf("record after the failed delete: %v, want a and b (b kept for the next prune)", m)
	}
	if err := wrapped.Prune(ctx, nil, desired); err != nil {
		t.Fatal(err)
	}
	if _, ok := now.State()["b"]; ok {
		t.Fatal("b, applied by the earlier run and no longer desired, is still in the real system")
	}
	if m, _ := rec.applied("objs"); len(m) != 1 || m["a"] == nil {
		t.Fatalf("record after the prune: %v, want a only", m)
	}
	if n := now.Count("delete", "b"); n != 2 {
		t.Fatalf("%d Deletes of b, want 2 (the failed one and the retry)", n)
	}
}

// Objects applied again as they were recorded (a restarted agent's first
// round) cost no write to the record; a changed one is written.
func TestRecordWritesOnlyChanges(t *testing.T) {
	rec := testRecord(t)
	key := func(o *recObj) index.Key { return index.Key(o.Name) }
	strip := func(o *recObj) *recObj { return &recObj{Name: o.Name} } // as a status would be left out
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	target := reconcilertest.NewTarget(func(o *recObj) string { return o.Name }).Batch()
	wrapped := recordTarget[*recObj](target, rec, "objs", key, strip, log).(reconciler.BatchTarget[*recObj])
	batch := func(names ...string) []reconciler.BatchEntry[*recObj] {
		var b []reconciler.BatchEntry[*recObj]
		for _, n := range names {
			b = append(b, reconciler.BatchEntry[*recObj]{Object: &recObj{Name: n}})
		}
		return b
	}
	writes := func() int64 { st := rec.db.Stats(); return st.TxStats.GetWrite() }
	ctx := context.Background()
	wrapped.UpdateBatch(ctx, nil, batch("a", "b", "c"))
	if m, _ := rec.applied("objs"); len(m) != 3 {
		t.Fatalf("record: %v, want a, b, c", m)
	}
	before := writes()
	wrapped.UpdateBatch(ctx, nil, batch("a", "b", "c"))
	if n := writes() - before; n != 0 {
		t.Fatalf("applying a, b, c again wrote %d pages to the record, want none", n)
	}
	wrapped.UpdateBatch(ctx, nil, batch("a", "d"))
	if n := writes() - before; n == 0 {
		t.Fatal("applying d, new, wrote nothing to the record")
	}
	if m, _ := rec.applied("objs"); len(m) != 4 || m["d"] == nil {
		t.Fatalf("record: %v, want a to d", m)
	}
}

// The db command's help names the agent's tables and their indexes.
func TestDBHelpNamesTables(t *testing.T) {
	long := dbCommand().Long
	for _, want := range []string{"sysctls", "routes", "iptables-rules", "covering"} {
		if !strings.Contains(long, want) {
			t.Errorf("db help lacks %q:\n%s", want, long)
		}
	}
}

// `run cells` shows how the agent is assembled with every function named:
// no anonymous funcN.
func TestRunCellsNamesEveryFunction(t *testing.T) {
	cmd := runCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"cells"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "runParts") {
		t.Fatalf("run cells printed:\n%s", out.String())
	}
	if anon := regexp.MustCompile(`\.func[0-9]+`).FindString(out.String()); anon != "" {
		t.Fatalf("run cells names an anonymous function (%s):\n%s", anon, out.String())
	}
}

// The record keeps iptables texts (iptables.TextStore): saved, forgotten,
// loaded back as they were, specs with any characters.
func TestRecordTexts(t *testing.T) {
	rec := testRecord(t)
	a := iptables.RuleText{Table: "filter", Chain: "STEADYSTATE-INPUT", Spec: "-p tcp --dport 22 -j ACCEPT", Text: "-A STEADYSTATE-INPUT -p tcp -m tcp --dport 22 -j ACCEPT"}
	b := iptables.RuleText{Table: "nat", Chain: "STEADYSTATE-POSTROUTING", Spec: `-m comment --comment "x y" -j MASQUERADE`, Text: `-A STEADYSTATE-POSTROUTING -m comment --comment "x y" -j MASQUERADE`}
	if err := rec.SaveTexts([]iptables.RuleText{a, b}, nil); err != nil {
		t.Fatal(err)
	}
	if err := rec.SaveTexts(nil, []iptables.RuleText{{Table: a.Table, Chain: a.Chain, Spec: a.Spec}}); err != nil {
		t.Fatal(err)
	}
	got, err := rec.LoadTexts()
	if err != nil || len(got) != 1 || got[0] != b {
		t.Fatalf("LoadTexts = %+v, %v; want only %+v", got, err, b)
	}
}

// recVal is an object with a value, for the record's model test.
type recVal struct {
	Name  string `json:"name"`
	Value int    `json:"value"`
}

// The record holds what the batches applied, whatever the mix of new,
// changed and unchanged objects of a batch and the gaps between them
// (the check against the record walks a cursor and seeks past gaps):
// against a map, over random rounds.
func TestRecordModel(t *testing.T) {
	rec := testRecord(t)
	inner := reconcilertest.NewTarget(func(o *recVal) string { return o.Name })
	key := func(o *recVal) index.Key { return index.Key(o.Name) }
	wrapped := recordTarget[*recVal](inner, rec, "vals", key, nil, slog.New(slog.NewTextHandler(io.Discard, nil))).(*recorded[*recVal])
	model := map[string]string{}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		var batch []*recVal
		seen := map[string]bool{}
		for range rng.IntN(100) + 1 {
			name := fmt.Sprintf("k%04d", rng.IntN(500))
			if seen[name] {
				continue
			}
			seen[name] = true
			o := &recVal{Name: name, Value: rng.IntN(3)}
			batch = append(batch, o)
			v, _ := json.Marshal(o)
			model[name] = string(v)
		}
		// A batch's record, as a batch target's round makes it.
		if err := wrapped.record(batch, nil); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		// The same batch again is recorded already: no write.
		before := lastTxID(t, rec)
		if err := wrapped.record(batch, nil); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if after := lastTxID(t, rec); after != before {
			t.Fatalf("round %d: the same batch again wrote the record (transaction %d, then %d)", round, before, after)
		}
		checkRecordHolds(t, rec, round, model)
	}
}

// testRecord opens a state record in a temporary directory, closed when
// the test ends.
func testRecord(t *testing.T) *stateRecord {
	t.Helper()
	rec, err := openState(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.db.Close() })
	return rec
}

// checkRecordHolds fails unless the record's vals hold exactly model
// (each object's JSON by name), after round.
func checkRecordHolds(t *testing.T, rec *stateRecord, round int, model map[string]string) {
	t.Helper()
	got, err := rec.applied("vals")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(model) {
		t.Fatalf("round %d: the record has %d objects, want %d", round, len(got), len(model))
	}
	for k, v := range model {
		if string(got[k]) != v {
			t.Fatalf("round %d: the record has %s = %s, want %s", round, k, got[k], v)
		}
	}
}

// lastTxID is the ID of the record's last write transaction.
func lastTxID(t *testing.T, rec *stateRecord) int {
	t.Helper()
	var id int
	if err := rec.view(func(tx *bolt.Tx) error { id = tx.ID(); return nil }); err != nil {
		t.Fatal(err)
	}
	return id
}

// A batch target's record is worked out while the target applies the
// batch (batcher.UpdateBatch): the record holds exactly what the target
// applied, an object that failed keeps the version an earlier batch
// applied (or none), and a panic of the target is the batch's failure, not
// a record of it: against a map, over random rounds with failures.
func TestRecordBatchModel(t *testing.T) {
	rec := testRecord(t)
	inner := reconcilertest.NewTarget(func(o *recVal) string { return o.Name })
	batcher := recordBatcher(t, rec, inner.Batch(), nil)
	model := map[string]string{}
	rng := rand.New(rand.NewPCG(3, 4))
	failed, applied := 0, 0
	for round := range 200 {
		var batch []reconciler.BatchEntry[*recVal]
		seen := map[string]bool{}
		failing := map[string]bool{}
		for range rng.IntN(100) + 1 {
			name := fmt.Sprintf("k%04d", rng.IntN(500))
			if seen[name] {
				continue
			}
			seen[name] = true
			batch = append(batch, reconciler.BatchEntry[*recVal]{Object: &recVal{Name: name, Value: rng.IntN(3)}})
			if rng.IntN(5) == 0 {
				failing[name] = true
				inner.Inject(name, reconcilertest.Fault{Times: 1})
			}
		}
		batcher.UpdateBatch(context.Background(), nil, batch)
		for _, e := range batch {
			if (e.Result != nil) != failing[e.Object.Name] {
				t.Fatalf("round %d: %s: result %v, injected failure %v", round, e.Object.Name, e.Result, failing[e.Object.Name])
			}
			if e.Result != nil {
				failed++
				continue
			}
			applied++
			v, _ := json.Marshal(e.Object)
			model[e.Object.Name] = string(v)
		}
		checkRecordHolds(t, rec, round, model)
	}
	if failed == 0 || applied == 0 {
		t.Fatalf("the rounds had %d failed and %d applied objects: the model tests both", failed, applied)
	}

	// A panic in the target fails the whole batch and records nothing.
	before := lastTxID(t, rec)
	inner.Inject("k9999", reconcilertest.Fault{Times: 1, Panic: true})
	batch := []reconciler.BatchEntry[*recVal]{{Object: &recVal{Name: "k9998"}}, {Object: &recVal{Name: "k9999"}}}
	func() {
		defer func() { _ = recover() }() // the reconciler's to recover
		batcher.UpdateBatch(context.Background(), nil, batch)
	}()
	if after := lastTxID(t, rec); after != before {
		t.Fatalf("a batch whose target panicked wrote the record (transaction %d, then %d)", before, after)
	}
}
