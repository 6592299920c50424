package statedb

import (
	"context"
	"errors"
	"slices"
	"strings"
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

	// DeriveSkip leaves Out unchanged: the object derived from the earlier
	// version of 3 stays. Object 4, written after it in the same
	// transaction, is propagated in the same step, so once it is there the
	// skip has been handled.
	wtxn = db.WriteTxn(in)
	in.Insert(wtxn, &testObject{ID: 3, Name: "skip-three"})
	in.Insert(wtxn, &testObject{ID: 4, Name: "four"})
	wtxn.Commit()
	waitFor(t, "object 4", func() bool { return slices.Equal(outIDs(), []uint64{1, 3, 4}) })
	if o, _, _ := out.Get(db.ReadTxn(), derivedID.Query(3)); o == nil || o.Length != len("three") {
		t.Fatalf("after a skipped change of 3, out holds %+v, want the object derived from \"three\"", o)
	}

	wtxn = db.WriteTxn(in)
	in.Delete(wtxn, &testObject{ID: 1})
	in.Delete(wtxn, &testObject{ID: 2})
	wtxn.Commit()
	waitFor(t, "delete", func() bool { return slices.Equal(outIDs(), []uint64{3, 4}) })
}

// TestDeriverRunAgain stops a Deriver, deletes and inserts in In while it is
// stopped, and runs it again: it resumes, and the delete is not lost. Close
// ends it for good.
func TestDeriverRunAgain(t *testing.T) {
	db, in := newTestTable(t, "in")
	out, err := NewTable(db, "out", derivedID)
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDeriver(db, in.ToTable(), out, func(o *testObject, deleted bool) (*derived, DeriveResult) {
		if deleted {
			return &derived{ID: o.ID}, DeriveDelete
		}
		return &derived{ID: o.ID, Length: len(o.Name)}, DeriveInsert
	})
	if err != nil {
		t.Fatal(err)
	}
	outIDs := func() []uint64 {
		var ids []uint64
		for o := range out.All(db.ReadTxn()) {
			ids = append(ids, o.ID)
		}
		return ids
	}
	run := func() (stop func() error) {
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- d.Run(ctx) }()
		return func() error { cancel(); return <-errc }
	}
	write := func(f func(WriteTxn)) {
		wtxn := db.WriteTxn(in)
		f(wtxn)
		wtxn.Commit()
	}

	write(func(w WriteTxn) { in.Insert(w, &testObject{ID: 1, Name: "one"}) })
	stop := run()
	waitFor(t, "first run", func() bool { return slices.Equal(outIDs(), []uint64{1}) })
	// A second Run while the first runs is refused.
	if err := d.Run(context.Background()); !errors.Is(err, ErrDeriverRunning) || !strings.Contains(err.Error(), "in -> out") {
		t.Fatalf("concurrent Run = %v, want ErrDeriverRunning naming the tables", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	write(func(w WriteTxn) {
		in.Delete(w, &testObject{ID: 1})
		in.Insert(w, &testObject{ID: 2, Name: "two"})
	})
	stop = run()
	waitFor(t, "second run", func() bool { return slices.Equal(outIDs(), []uint64{2}) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	d.Close()
	if n := in.(*table[*testObject]).trackers.count.Load(); n != 0 {
		t.Fatalf("%d change iterators after Close", n)
	}
	if err := d.Run(context.Background()); !errors.Is(err, ErrDeriverClosed) {
		t.Fatalf("Run after Close = %v, want ErrDeriverClosed", err)
	}

	// Close while running stops the run.
	d2, err := NewDeriver(db, in.ToTable(), out, func(o *testObject, deleted bool) (*derived, DeriveResult) { return nil, DeriveSkip })
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- d2.Run(context.Background()) }()
	d2.Close()
	if err := <-errc; err != nil && !errors.Is(err, ErrDeriverClosed) {
		t.Fatalf("Run ended by Close = %v", err)
	}
	if _, err := NewDeriver[*testObject, *derived](db, in.ToTable(), out, nil); !errors.Is(err, ErrInvalidDeriver) {
		t.Fatalf("NewDeriver(nil transform) = %v, want ErrInvalidDeriver", err)
	}
}
