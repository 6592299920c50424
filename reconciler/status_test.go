package reconciler_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
)

// The status index makes "all objects in Error" a table query.
func TestStatusIndexQuery(t *testing.T) {
	f := newFixture(t, false)
	bad := []string{"o0002", "o0005", "o0007"}
	for _, k := range bad {
		f.target.Inject(k, reconcilertest.Fault{})
	}
	f.start()
	f.insertN("o", 10)
	if err := f.rec.Reconciled(); !errors.Is(err, reconciler.ErrNotAllReconciled) {
		t.Fatalf("Reconciled: %v", err)
	}
	txn := f.db.ReadTxn()
	var inError []string
	for obj := range f.table.List(txn, statusIndex.Query(reconciler.StatusKindError)) {
		inError = append(inError, obj.ID)
	}
	if !slices.Equal(inError, bad) {
		t.Fatalf("objects in Error: %v, want %v", inError, bad)
	}
	q, err := statusIndex.QueryString("done")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range f.table.List(txn, q) {
		n++
	}
	if n != 7 {
		t.Fatalf("%d objects Done, want 7", n)
	}
	if _, err := statusIndex.QueryString("bogus"); err == nil {
		t.Fatal("QueryString(bogus) did not fail")
	}
}

// Status kinds read and print by name.
func TestStatusKind(t *testing.T) {
	for k, name := range map[reconciler.StatusKind]string{
		reconciler.StatusKindUnset: "", reconciler.StatusKindPending: "Pending", reconciler.StatusKindRefreshing: "Refreshing",
		reconciler.StatusKindDone: "Done", reconciler.StatusKindError: "Error",
	} {
		if k.String() != name {
			t.Errorf("%d.String() = %q, want %q", k, k.String(), name)
		}
		var back reconciler.StatusKind
		if err := back.UnmarshalText([]byte(name)); err != nil || back != k {
			t.Errorf("UnmarshalText(%q) = %v, %v", name, back, err)
		}
	}
	if s := reconciler.StatusError(errors.New("boom")); s.Kind != reconciler.StatusKindError || s.Error != "boom" || s.String() != "Error: boom" {
		t.Errorf("StatusError: %+v", s)
	}
	for _, s := range []reconciler.Status{reconciler.StatusPending(), reconciler.StatusRefreshing()} {
		if !s.IsPending() || s.UpdatedAt.IsZero() {
			t.Errorf("%v: IsPending=false or no time", s)
		}
	}
	if reconciler.StatusDone().IsPending() {
		t.Error("Done is pending")
	}
	terminal := reconciler.Terminal(errors.New("x"))
	if !reconciler.IsTerminal(fmt.Errorf("wrapped: %w", terminal)) || reconciler.IsTerminal(errors.New("x")) || reconciler.Terminal(nil) != nil {
		t.Error("Terminal/IsTerminal")
	}
}
