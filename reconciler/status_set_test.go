package reconciler_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
	"github.com/steadystate/steadystate/statedb"
)

// StatusError(nil) is an Error status, not a panic.
func TestStatusErrorNil(t *testing.T) {
	s := reconciler.StatusError(nil)
	if s.Kind != reconciler.StatusKindError || s.Error != "unknown error" || s.UpdatedAt.IsZero() {
		t.Fatalf("StatusError(nil) = %+v", s)
	}
}

// Every pending status gets an ID of its own; Done and Error made by the
// constructors have none.
func TestStatusIDs(t *testing.T) {
	a, b, r := reconciler.StatusPending(), reconciler.StatusPending(), reconciler.StatusRefreshing()
	if a.ID == 0 || b.ID == 0 || r.ID == 0 || a.ID == b.ID || b.ID == r.ID {
		t.Fatalf("IDs %d %d %d: want distinct and non-zero", a.ID, b.ID, r.ID)
	}
	if reconciler.StatusDone().ID != 0 || reconciler.StatusError(errors.New("x")).ID != 0 {
		t.Fatal("Done or Error made with an ID")
	}
}

func TestStatusSet(t *testing.T) {
	var zero reconciler.StatusSet
	if st := zero.Get("kernel"); st.Kind != reconciler.StatusKindUnset || zero.String() != "" {
		t.Fatalf("zero set: Get = %v, String = %q", st, zero.String())
	}

	s := reconciler.NewStatusSet()
	k, b := s.Get("kernel"), s.Get("bgp")
	if k.Kind != reconciler.StatusKindPending || k.ID == 0 || k.ID != b.ID || s.String() != "Pending" {
		t.Fatalf("new set: kernel %+v, bgp %+v, String %q", k, b, s.String())
	}

	done := reconciler.Status{Kind: reconciler.StatusKindDone, UpdatedAt: time.Now(), ID: k.ID}
	s2 := s.Set("kernel", done)
	if s.Get("kernel").Kind != reconciler.StatusKindPending {
		t.Fatal("Set changed the set it was called on")
	}
	if s2.Get("kernel") != done || s2.Get("bgp").Kind != reconciler.StatusKindPending || s2.Get("bgp").ID != k.ID {
		t.Fatalf("after Set: %v", s2)
	}
	s3 := s2.Set("bgp", reconciler.StatusError(errors.New("timeout"))).Set("kernel", done)
	if got, want := s3.String(), "bgp: Error: timeout, kernel: Done (others Pending)"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}

	p := s3.Pending()
	if pk := p.Get("kernel"); pk.Kind != reconciler.StatusKindPending || pk.ID == k.ID {
		t.Fatalf("Pending(): kernel %+v, want Pending under a new ID", pk)
	}

	data, err := json.Marshal(s3)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"members":{"bgp":{"kind":"Error"`) {
		t.Fatalf("JSON %s", data)
	}
	var back reconciler.StatusSet
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.String() != s3.String() || back.Get("kernel").ID != k.ID || back.Get("other").ID != k.ID {
		t.Fatalf("round trip: %v (%s), want %v", back, data, s3)
	}
	if err := json.Unmarshal([]byte(`{"members": 3}`), &back); err == nil {
		t.Fatal("bad JSON accepted")
	}
}

// WaitUntilReconciled's failure is a NotReconciledError with the failing
// count and the lowest revision waiting for a retry.
func TestNotReconciledError(t *testing.T) {
	f := newFixture(t, false)
	f.cfg.RetryBackoffMin, f.cfg.RetryBackoffMax = time.Hour, time.Hour
	f.target.Inject("b", reconcilertest.Fault{})
	f.target.Inject("c", reconcilertest.Fault{})
	f.start()
	f.insert(&testObj{ID: "a", Value: 1})
	revB := f.insert(&testObj{ID: "b", Value: 1})
	rev := f.insert(&testObj{ID: "c", Value: 1})
	_, err := f.rec.WaitUntilReconciled(t.Context(), rev)
	var nre *reconciler.NotReconciledError
	if !errors.As(err, &nre) || !errors.Is(err, reconciler.ErrNotAllReconciled) {
		t.Fatalf("WaitUntilReconciled: %v (%T)", err, err)
	}
	if nre.Failing != 2 || nre.LowestRetryRevision != revB || nre.Reconciler != "test" {
		t.Fatalf("%+v, want 2 failing from revision %d", nre, revB)
	}
	if !strings.Contains(err.Error(), `reconciler "test"`) || !strings.Contains(err.Error(), "2 objects failing") {
		t.Fatalf("message %q", err)
	}
}

// DryRun lists what a full reconciliation would change, and changes
// nothing.
func TestDryRun(t *testing.T) {
	f := newFixture(t, false)
	equal := func(applied, desired *testObj) bool { return applied.Value == desired.Value }
	f.insert(&testObj{ID: "a", Value: 1}, &testObj{ID: "b", Value: 2}, &testObj{ID: "c", Value: 3})
	f.target.SetState("a", &testObj{ID: "a", Value: 1})
	f.target.SetState("b", &testObj{ID: "b", Value: 5})
	f.target.SetState("stray", &testObj{ID: "stray"})

	plan, err := reconciler.DryRun(t.Context(), f.db, f.table, f.target.Planner(equal))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := plan.String(), "remove stray\nchange b\nadd c\n"; got != want {
		t.Fatalf("plan:\n%s\nwant:\n%s", got, want)
	}
	if f.target.NumOps() != 0 || len(f.target.State()) != 3 {
		t.Fatalf("DryRun changed the target: %v", f.target.Ops())
	}
	if _, err := reconciler.DryRun(t.Context(), f.db, f.table, reconciler.Target[*testObj](f.target)); !errors.Is(err, reconciler.ErrNoPlanner) {
		t.Fatalf("DryRun without a planner: %v", err)
	}
	if _, err := reconciler.DryRun(t.Context(), f.db, f.table, failingPlanner{f.target.Planner(equal)}); err == nil ||
		!strings.Contains(err.Error(), `dry run of table "objs"`) || !strings.Contains(err.Error(), "a=1: cannot read") {
		t.Fatalf("DryRun with failing plans: %v", err)
	}
}

// failingPlanner fails every PlanUpdate.
type failingPlanner struct {
	reconcilertest.PlannerTarget[*testObj]
}

func (failingPlanner) PlanUpdate(context.Context, statedb.ReadTxn, *testObj) (reconciler.Plan, error) {
	return nil, errors.New("cannot read")
}
