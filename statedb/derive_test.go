package statedb

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/steadystate/steadystate/index"
)

// derived is the output object of the derive tests.
type derived struct {
	ID     uint64
	Length int
}

var derivedID = Index[*derived, uint64]{
	Name:       "id",
	FromObject: func(d *derived) index.KeySet { return index.NewKeySet(index.Uint64(d.ID)) },
	FromKey:    index.Uint64,
	Unique:     true,
}

// waitFor polls cond until it holds or the test times out.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestDerive(t *testing.T) {
	db, in := newTestTable(t, "in")
	out, err := NewTable(db, "out", derivedID)
	if err != nil {
		t.Fatal(err)
	}
	wtxn := db.WriteTxn(in)
	inDone := in.RegisterInitializer(wtxn, "loader")
	in.Insert(wtxn, &testObject{ID: 1, Name: "one"})
	in.Insert(wtxn, &testObject{ID: 2, Name: "skip-me"})
	wtxn.Commit()

	// The transform drops objects named skip-*.
	d, err := NewDeriver(db, in.ToTable(), out, func(o *testObject, deleted bool) (*derived, DeriveResult) {
		if len(o.Name) >= 5 && o.Name[:5] == "skip-" {
			return nil, DeriveSkip
		}
		if deleted {
			return &derived{ID: o.ID}, DeriveDelete
		}
		return &derived{ID: o.ID, Length: len(o.Name)}, DeriveInsert
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); d.Run(ctx) }()
	defer func() { cancel(); wg.Wait() }()

	outIDs := func() []uint64 {
		var ids []uint64
		for o := range out.All(db.ReadTxn()) {
			ids = append(ids, o.ID)
		}
		return ids
	}
	waitFor(t, "initial propagation", func() bool { return slices.Equal(outIDs(), []uint64{1}) })
	if ok, _ := out.Initialized(db.ReadTxn()); ok {
		t.Fatal("out is initialized before in is")
	}

	wtxn = db.WriteTxn(in)
	inDone(wtxn)
	in.Insert(wtxn, &testObject{ID: 3, Name: "three"})
	in.Insert(wtxn, &testObject{ID: 1, Name: "uno!"})
	wtxn.Commit()
	_, initCh := out.Initialized(db.ReadTxn())
	select {
	case <-initCh:
	case <-time.After(5 * time.Second):
		t.Fatal("out was not initialized after in was")
	}
	waitFor(t, "insert and replace", func() bool {
		o, _, _ := out.Get(db.ReadTxn(), derivedID.Query(1))
		return slices.Equal(outIDs(), []uint64{1, 3}) && o != nil && o.Length == 4
	})

	wtxn = db.WriteTxn(in)
	in.Delete(wtxn, &testObject{ID: 1})
	in.Delete(wtxn, &testObject{ID: 2})
	wtxn.Commit()
	waitFor(t, "delete", func() bool { return slices.Equal(outIDs(), []uint64{3}) })
}
