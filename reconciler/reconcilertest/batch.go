package reconcilertest

import (
	"context"
	"fmt"
	"slices"

	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// Batch is one UpdateBatch or DeleteBatch call.
type Batch struct {
	Kind reconciler.Operation // reconciler.OpUpdate or OpDelete
	Size int                  // number of entries
}

// String returns "update[size]" or "delete[size]".
func (b Batch) String() string { return fmt.Sprintf("%s[%d]", b.Kind, b.Size) }

// BatchTarget is a Target that also implements reconciler.BatchTarget,
// so the reconciler applies whole rounds at once. Get it with
// Target.Batch.
type BatchTarget[Obj any] struct{ *Target[Obj] }

var _ reconciler.BatchTarget[int] = BatchTarget[int]{}

// Batch returns t with reconciler.BatchTarget: its batches are recorded
// (see Batches) and each entry is applied, recorded and faulted like an
// Update or Delete of its own, in order. A Panic fault panics out of the
// whole batch, as a real batch target might.
func (t *Target[Obj]) Batch() BatchTarget[Obj] { return BatchTarget[Obj]{t} }

// UpdateBatch applies every entry as an Update and sets its Result.
func (b BatchTarget[Obj]) UpdateBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[Obj]) {
	b.batch(ctx, reconciler.OpUpdate, batch)
}

// DeleteBatch applies every entry as a Delete and sets its Result.
func (b BatchTarget[Obj]) DeleteBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[Obj]) {
	b.batch(ctx, reconciler.OpDelete, batch)
}

func (b BatchTarget[Obj]) batch(ctx context.Context, kind reconciler.Operation, batch []reconciler.BatchEntry[Obj]) {
	t := b.Target
	t.mu.Lock()
	t.batches = append(t.batches, Batch{Kind: kind, Size: len(batch)})
	t.changed.wake()
	t.mu.Unlock()
	for i := range batch {
		batch[i].Result = t.applyObject(ctx, kind, batch[i].Object, true)
	}
}

// Batches returns every batch call so far, in order. It is empty unless
// the reconciler was given Batch's target.
func (t *Target[Obj]) Batches() []Batch {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.batches)
}
