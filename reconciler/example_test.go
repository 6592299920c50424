package reconciler_test

import (
	"context"
	"fmt"
	"io"
	"iter"
	"log/slog"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// Setting is a desired kernel-like setting; Status is the reconciler's.
type Setting struct {
	Key, Value string
	Status     reconciler.Status
}

var settingKey = statedb.Index[*Setting, string]{
	Name:       "key",
	FromObject: func(s *Setting) index.KeySet { return index.NewKeySet(index.String(s.Key)) },
	FromKey:    index.String,
	Unique:     true,
}

// settings is the real system: it prints what it is told to do.
type settings struct{}

func (settings) Update(ctx context.Context, txn statedb.ReadTxn, s *Setting) error {
	fmt.Printf("set %s=%s\n", s.Key, s.Value)
	return nil
}

func (settings) Delete(ctx context.Context, txn statedb.ReadTxn, s *Setting) error {
	fmt.Printf("unset %s\n", s.Key)
	return nil
}

func (settings) Prune(ctx context.Context, txn statedb.ReadTxn, desired iter.Seq2[*Setting, statedb.Revision]) error {
	return nil
}

// A reconciler without hive: New, Run in a goroutine, write desired objects
// as Pending and wait until they are reconciled.
func ExampleNew() {
	db := statedb.New()
	table, err := statedb.NewTable(db, "settings", settingKey)
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := reconciler.New(db, reconciler.Config[*Setting]{
		Name:            "settings",
		Table:           table,
		Target:          settings{},
		GetObjectStatus: func(s *Setting) reconciler.Status { return s.Status },
		SetObjectStatus: func(s *Setting, st reconciler.Status) *Setting { s.Status = st; return s },
		CloneObject:     func(s *Setting) *Setting { c := *s; return &c },
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()

	wtxn := db.WriteTxn(table)
	table.Insert(wtxn, &Setting{Key: "net.ipv4.ip_forward", Value: "1", Status: reconciler.StatusPending()})
	table.Insert(wtxn, &Setting{Key: "vm.swappiness", Value: "10", Status: reconciler.StatusPending()})
	rev := table.Revision(wtxn.Commit())
	if _, err := r.WaitUntilReconciled(ctx, rev); err != nil {
		fmt.Println(err)
	}

	wtxn = db.WriteTxn(table)
	table.Delete(wtxn, &Setting{Key: "vm.swappiness"})
	rev = table.Revision(wtxn.Commit())
	if _, err := r.WaitUntilReconciled(ctx, rev); err != nil {
		fmt.Println(err)
	}

	for s := range table.All(db.ReadTxn()) {
		fmt.Printf("%s: %s\n", s.Key, s.Status.Kind)
	}
	cancel()
	fmt.Println("Run:", <-done)
	// Output:
	// set net.ipv4.ip_forward=1
	// set vm.swappiness=10
	// unset vm.swappiness
	// net.ipv4.ip_forward: Done
	// Run: <nil>
}
