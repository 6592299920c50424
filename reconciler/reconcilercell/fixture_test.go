package reconcilercell

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
	"github.com/steadystate/steadystate/statedb"
)

// object is the desired object of the tests.
type object struct {
	ID     string
	Status reconciler.Status
}

func getStatus(o *object) reconciler.Status { return o.Status }

var idIndex = statedb.Index[*object, string]{
	Name:       "id",
	FromObject: func(o *object) index.KeySet { return index.NewKeySet(index.String(o.ID)) },
	FromKey:    index.String,
	Unique:     true,
}

var statusIndex = reconciler.StatusIndex(getStatus)

// newTarget returns a recording target (reconcilertest.Target) on which
// the objects of the given IDs fail, every time, with an error wrapping
// reconcilertest.ErrInjected.
func newTarget(fail ...string) *reconcilertest.Target[*object] {
	t := reconcilertest.NewTarget(func(o *object) string { return o.ID })
	for _, id := range fail {
		t.Inject(id, reconcilertest.Fault{})
	}
	return t
}

// newTable returns a DB with an empty table of objects, indexed by status.
func newTable(t *testing.T, name string) (*statedb.DB, statedb.RWTable[*object]) {
	t.Helper()
	db := statedb.New()
	tbl, err := statedb.NewTable(db, name, idIndex, statusIndex)
	if err != nil {
		t.Fatal(err)
	}
	return db, tbl
}

// config is a valid config of a reconciler named name; a failed object
// is retried only after an hour, that is not during a test.
func config(name string, tbl statedb.RWTable[*object], target reconciler.Target[*object]) reconciler.Config[*object] {
	return reconciler.Config[*object]{
		Name:            name,
		Table:           tbl,
		Target:          target,
		GetObjectStatus: getStatus,
		SetObjectStatus: func(o *object, s reconciler.Status) *object { o.Status = s; return o },
		CloneObject:     func(o *object) *object { c := *o; return &c },
		RetryBackoffMin: time.Hour,
	}
}

// insert inserts Pending objects of the given IDs and returns the table's
// revision.
func insert(db *statedb.DB, tbl statedb.RWTable[*object], ids ...string) statedb.Revision {
	wtxn := db.WriteTxn(tbl)
	for _, id := range ids {
		tbl.Insert(wtxn, &object{ID: id, Status: reconciler.StatusPending()})
	}
	return tbl.Revision(wtxn.Commit())
}

// remove deletes the objects of the given IDs and returns the revision.
func remove(db *statedb.DB, tbl statedb.RWTable[*object], ids ...string) statedb.Revision {
	wtxn := db.WriteTxn(tbl)
	for _, id := range ids {
		tbl.Delete(wtxn, &object{ID: id})
	}
	return tbl.Revision(wtxn.Commit())
}

// reconciled waits until r (one that Register runs in a hive; those of
// reconcilertest.Start have Reconciled) has attempted every change up to
// rev; the error wraps ErrNotAllReconciled when some objects failed.
func reconciled(t *testing.T, r reconciler.Reconciler[*object], rev statedb.Revision) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := r.WaitUntilReconciled(ctx, rev)
	if err != nil && !errors.Is(err, reconciler.ErrNotAllReconciled) {
		t.Fatalf("WaitUntilReconciled(%d): %v", rev, err)
	}
	return err
}

// eventually polls cond until it holds, for a state of the hive's health
// tree that is sure to come (the tree has no change notification).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// gather returns every sample of reg as `name{k="v",...}` -> value (the
// sample count for histograms), labels sorted by name.
func gather(t testing.TB, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, fam := range families {
		for _, m := range fam.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			sort.Strings(labels)
			key := fam.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}
