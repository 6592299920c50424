package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
)

// recordBatcher wraps a batch target of recVal with the record, recording
// objects as strip makes them; its log is discarded.
func recordBatcher(t *testing.T, rec *stateRecord, inner reconcilertest.BatchTarget[*recVal], strip func(*recVal) *recVal) reconciler.BatchTarget[*recVal] {
	t.Helper()
	return recordBatcherLog(t, rec, inner, strip, io.Discard)
}

// recordBatcherLog is recordBatcher logging to w.
func recordBatcherLog(t *testing.T, rec *stateRecord, inner reconcilertest.BatchTarget[*recVal], strip func(*recVal) *recVal, w io.Writer) reconciler.BatchTarget[*recVal] {
	t.Helper()
	key := func(o *recVal) index.Key { return index.Key(o.Name) }
	wrapped := recordTarget[*recVal](inner, rec, "vals", key, strip, slog.New(slog.NewTextHandler(w, nil)))
	b, ok := wrapped.(reconciler.BatchTarget[*recVal])
	if !ok {
		t.Fatalf("the record's wrapper of a batch target is a %T, not a batch target", wrapped)
	}
	return b
}

// A panic while the record of a batch is worked out (in strip) is the
// failure of the entries the target applied, not a crash and not a
// record; it is logged with its stack; an entry the target failed keeps its
// own error; and once the panic is gone the batch is recorded.
func TestRecordBatchStripPanics(t *testing.T) {
	rec := testRecord(t)
	inner := reconcilertest.NewTarget(func(o *recVal) string { return o.Name })
	var broken atomic.Bool
	broken.Store(true)
	strip := func(o *recVal) *recVal {
		if o.Name == "b" && broken.Load() {
			panic("strip of b")
		}
		return o
	}
	var log syncBuffer
	b := recordBatcherLog(t, rec, inner.Batch(), strip, &log)
	injected := errors.New("c fails")
	inner.Inject("c", reconcilertest.Fault{Times: 1, Err: injected})
	batch := []reconciler.BatchEntry[*recVal]{{Object: &recVal{Name: "a"}}, {Object: &recVal{Name: "b"}}, {Object: &recVal{Name: "c"}}}
	before := lastTxID(t, rec)
	b.UpdateBatch(context.Background(), nil, batch) // a panic here fails the test
	for _, e := range batch[:2] {
		if e.Result == nil || !strings.Contains(e.Result.Error(), "strip of b") {
			t.Errorf("%s: result %v, want the panic of the record", e.Object.Name, e.Result)
		}
	}
	if !errors.Is(batch[2].Result, injected) {
		t.Errorf("c: result %v, want its own failure %v", batch[2].Result, injected)
	}
	if out := log.String(); !strings.Contains(out, `msg="Recording panicked"`) || !strings.Contains(out, "strip of b") || !strings.Contains(out, "record_batch_test.go") {
		t.Errorf("the panic was not logged with its stack:\n%s", out)
	}
	if after := lastTxID(t, rec); after != before {
		t.Fatalf("a batch whose record panicked wrote the record (transaction %d, then %d)", before, after)
	}
	if got, err := rec.applied("vals"); err != nil || len(got) != 0 {
		t.Fatalf("the record holds %v (%v), want nothing", got, err)
	}

	broken.Store(false)
	for i := range batch {
		batch[i].Result = nil
	}
	b.UpdateBatch(context.Background(), nil, batch)
	got, err := rec.applied("vals")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range batch {
		if e.Result != nil {
			t.Errorf("%s: %v after the panic was gone", e.Object.Name, e.Result)
		}
		if got[e.Object.Name] == nil {
			t.Errorf("%s applied but not recorded", e.Object.Name)
		}
	}
}

// A target that panics while the record of its batch is worked out: the
// panic leaves UpdateBatch (the reconciler's to recover) only once the
// record's goroutine is done, so nothing of the operation outlives it.
func TestRecordBatchTargetPanicWaits(t *testing.T) {
	rec := testRecord(t)
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var stripped atomic.Int32
		strip := func(o *recVal) *recVal {
			<-release
			stripped.Add(1)
			return o
		}
		inner := reconcilertest.NewTarget(func(o *recVal) string { return o.Name })
		inner.Inject("b", reconcilertest.Fault{Times: 1, Panic: true})
		b := recordBatcher(t, rec, inner.Batch(), strip)
		batch := []reconciler.BatchEntry[*recVal]{{Object: &recVal{Name: "a"}}, {Object: &recVal{Name: "b"}}}
		var returned, panicked atomic.Bool
		go func() {
			defer func() {
				panicked.Store(recover() != nil)
				returned.Store(true)
			}()
			b.UpdateBatch(context.Background(), nil, batch)
		}()
		synctest.Wait()
		early := returned.Load()
		close(release)
		synctest.Wait()
		if early {
			t.Fatal("the target's panic left UpdateBatch while its record was still worked out")
		}
		if !returned.Load() || !panicked.Load() {
			t.Fatalf("UpdateBatch returned %v, panicked %v; want the target's panic", returned.Load(), panicked.Load())
		}
		if n := stripped.Load(); n != 2 {
			t.Fatalf("the record's goroutine stripped %d objects, want 2", n)
		}
	})
}

// An object the target failed is not recorded, so that it cannot be
// recorded (strip panics) fails nothing: the applied entries of its batch
// are recorded and Done, and it keeps its own error.
func TestRecordBatchFailedUnrecordable(t *testing.T) {
	rec := testRecord(t)
	inner := reconcilertest.NewTarget(func(o *recVal) string { return o.Name })
	strip := func(o *recVal) *recVal {
		if o.Name == "c" {
			panic("strip of c")
		}
		return o
	}
	b := recordBatcher(t, rec, inner.Batch(), strip)
	injected := errors.New("c fails")
	inner.Inject("c", reconcilertest.Fault{Times: 1, Err: injected})
	batch := []reconciler.BatchEntry[*recVal]{{Object: &recVal{Name: "a"}}, {Object: &recVal{Name: "c"}}, {Object: &recVal{Name: "d", Value: 1}}}
	b.UpdateBatch(context.Background(), nil, batch)
	if !errors.Is(batch[1].Result, injected) {
		t.Errorf("c: result %v, want its own failure %v", batch[1].Result, injected)
	}
	got, err := rec.applied("vals")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []reconciler.BatchEntry[*recVal]{batch[0], batch[2]} {
		if e.Result != nil {
			t.Errorf("%s: %v, though the target applied it and it can be recorded", e.Object.Name, e.Result)
		}
		if want, _ := json.Marshal(e.Object); string(got[e.Object.Name]) != string(want) {
			t.Errorf("%s: recorded %s, want %s", e.Object.Name, got[e.Object.Name], want)
		}
	}
	if len(got) != 2 {
		t.Errorf("the record holds %d objects, want 2 (a and d)", len(got))
	}
}
