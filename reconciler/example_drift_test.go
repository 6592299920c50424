package reconciler_test

import (
	"context"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"sync"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// watchedSettings is a real system that says when it was changed behind
// the reconciler's back: a map of values, with notifications on a channel
// (as rtnetlink or nf_tables send them).
type watchedSettings struct {
	mu      sync.Mutex
	values  map[string]string
	changed chan string // the keys changed by hand
}

func (s *watchedSettings) Update(ctx context.Context, txn statedb.ReadTxn, obj *Setting) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.values[obj.Key] = obj.Value
	return nil
}

func (s *watchedSettings) Delete(ctx context.Context, txn statedb.ReadTxn, obj *Setting) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.values, obj.Key)
	return nil
}

func (s *watchedSettings) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*Setting, statedb.Revision]) error {
	return nil
}

// PlanUpdate (reconciler.Planner) reads before the write: nothing to do
// when the value is there.
func (s *watchedSettings) PlanUpdate(ctx context.Context, txn statedb.ReadTxn, obj *Setting) (reconciler.Plan, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.values[obj.Key]
	switch {
	case !ok:
		return reconciler.Plan{{Action: reconciler.ActionAdd, Object: obj.Key, Detail: obj.Value}}, nil
	case cur != obj.Value:
		return reconciler.Plan{{Action: reconciler.ActionChange, Object: obj.Key, Detail: cur + " -> " + obj.Value}}, nil
	}
	return nil, nil
}

func (s *watchedSettings) PlanDelete(ctx context.Context, txn statedb.ReadTxn, obj *Setting) (reconciler.Plan, error) {
	return nil, nil
}

func (s *watchedSettings) PlanPrune(context.Context, statedb.ReadTxn, iter.Seq2[*Setting, statedb.Revision]) (reconciler.Plan, error) {
	return nil, nil
}

// WatchDrift (reconciler.DriftTarget) passes the notifications on: first
// ChangedAll, since what changed before is unknown, then each key changed.
func (s *watchedSettings) WatchDrift(ctx context.Context, drift reconciler.Drift) error {
	drift.ChangedAll()
	for {
		select {
		case <-ctx.Done():
			return nil
		case key := <-s.changed:
			drift.Changed(index.String(key))
		}
	}
}

// setByHand changes the real system behind the reconciler's back.
func (s *watchedSettings) setByHand(key, value string) {
	s.mu.Lock()
	s.values[key] = value
	s.mu.Unlock()
	s.changed <- key
}

// A target that reports drift (reconciler.DriftTarget) has it repaired at
// once: the reported object is planned, repaired only because its plan
// shows a change, and the repair handed to Config.OnRepair.
func ExampleDriftTarget() {
	db := statedb.New()
	table, err := statedb.NewTable(db, "settings", settingKey)
	if err != nil {
		fmt.Println(err)
		return
	}
	target := &watchedSettings{values: map[string]string{}, changed: make(chan string)}
	repaired := make(chan reconciler.Repair, 1)
	r, err := reconciler.New(db, reconciler.Config[*Setting]{
		Name:            "settings",
		Table:           table,
		Target:          target,
		GetObjectStatus: func(s *Setting) reconciler.Status { return s.Status },
		SetObjectStatus: func(s *Setting, st reconciler.Status) *Setting { s.Status = st; return s },
		CloneObject:     func(s *Setting) *Setting { c := *s; return &c },
		OnRepair:        func(rep reconciler.Repair) { repaired <- rep },
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
	rev := table.Revision(wtxn.Commit())
	if _, err := r.WaitUntilReconciled(ctx, rev); err != nil {
		fmt.Println(err)
	}

	target.setByHand("net.ipv4.ip_forward", "0")
	rep := <-repaired
	fmt.Printf("repaired %s (found by %s): %s", rep.Object, rep.FoundBy, rep.Changes)
	target.mu.Lock()
	fmt.Println("real system:", target.values)
	target.mu.Unlock()
	cancel()
	fmt.Println("Run:", <-done)
	// Output:
	// repaired "net.ipv4.ip_forward" (found by event): change net.ipv4.ip_forward: 0 -> 1
	// real system: map[net.ipv4.ip_forward:1]
	// Run: <nil>
}
