package reconcilertest

import (
	"context"
	"iter"
	"testing"

	"go.uber.org/goleak"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type obj struct {
	ID     uint64
	Status reconciler.Status
}

type nop struct{}

func (nop) Update(context.Context, statedb.ReadTxn, *obj) error { return nil }
func (nop) Delete(context.Context, statedb.ReadTxn, *obj) error { return nil }
func (nop) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*obj, statedb.Revision]) error {
	return nil
}

// TestStart: the reconciler runs until stop, which is idempotent and leaves
// no goroutine behind (goleak).
func TestStart(t *testing.T) {
	db := statedb.New()
	tbl, err := statedb.NewTable(db, "objs", statedb.Index[*obj, uint64]{
		Name:       "id",
		FromObject: func(o *obj) index.KeySet { return index.NewKeySet(index.Uint64(o.ID)) },
		FromKey:    index.Uint64,
		Unique:     true,
	})
	if err != nil {
		t.Fatal(err)
	}
	r, stop := Start(t, db, reconciler.Config[*obj]{
		Name: "test", Table: tbl, Target: nop{},
		GetObjectStatus: func(o *obj) reconciler.Status { return o.Status },
		SetObjectStatus: func(o *obj, s reconciler.Status) *obj { o.Status = s; return o },
		CloneObject:     func(o *obj) *obj { c := *o; return &c },
	})
	wtxn := db.WriteTxn(tbl)
	tbl.Insert(wtxn, &obj{ID: 1, Status: reconciler.StatusPending()})
	rev := tbl.Revision(wtxn.Commit())
	if _, err := r.WaitUntilReconciled(context.Background(), rev); err != nil {
		t.Fatal(err)
	}
	if o, _, _ := tbl.Get(db.ReadTxn(), statedb.QueryByPrimaryKey[*obj](tbl, index.Uint64(1))); o.Status.Kind != reconciler.StatusKindDone {
		t.Fatalf("status %v, want Done", o.Status)
	}
	stop()
	stop()
}
