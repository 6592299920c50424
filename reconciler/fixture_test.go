package reconciler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/steadystate/steadystate/statedb"
)

// fixture is a table, a test target and a reconciler running between them,
// with helpers that read like the steps of a scenario.
type fixture struct {
	t       testing.TB
	db      *statedb.DB
	table   statedb.RWTable[*testObj]
	target  *testTarget
	health  *recordingHealth
	metrics *recordingMetrics
	cfg     Config[*testObj] // adjust before start
	rec     Reconciler[*testObj]
	cancel  context.CancelFunc
	done    chan error
}

// newFixture returns a fixture that is not started yet; with batch, the
// target implements BatchTarget.
func newFixture(t testing.TB, batch bool) *fixture {
	f := &fixture{t: t, target: newTestTarget(), health: &recordingHealth{}, metrics: newRecordingMetrics()}
	f.db, f.table = newTestTable(t)
	var target Target[*testObj] = f.target
	if batch {
		target = testBatchTarget{f.target}
	}
	f.cfg = testConfig(f.table, target)
	f.cfg.Health = f.health
	f.cfg.Metrics = f.metrics
	f.cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil)) // shown with the test's failure
	return f
}

func (f *fixture) started() bool { return f.rec != nil }

// start creates the reconciler from f.cfg and runs it until the test ends.
func (f *fixture) start() {
	f.t.Helper()
	rec, err := New(f.db, f.cfg)
	if err != nil {
		f.t.Fatalf("New: %v", err)
	}
	f.rec = rec
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.done = make(chan error, 1)
	go func() { f.done <- rec.Run(ctx) }()
	f.t.Cleanup(f.stop)
}

// stop cancels Run and waits for it to return nil.
func (f *fixture) stop() {
	f.t.Helper()
	if f.cancel == nil {
		return
	}
	f.cancel()
	f.cancel = nil
	select {
	case err := <-f.done:
		if err != nil {
			f.t.Errorf("Run returned %v", err)
		}
	case <-time.After(waitTimeout):
		f.t.Errorf("Run did not return %v after its context was cancelled", waitTimeout)
	}
}

// insert inserts new Pending versions of the objects in one transaction
// and returns the revision of the commit.
func (f *fixture) insert(objs ...*testObj) statedb.Revision {
	f.t.Helper()
	wtxn := f.db.WriteTxn(f.table)
	defer wtxn.Abort()
	for _, o := range objs {
		o.Status = StatusPending()
		if _, _, err := f.table.Insert(wtxn, o); err != nil {
			f.t.Fatalf("insert %v: %v", o, err)
		}
	}
	return f.table.Revision(wtxn.Commit())
}

// insertN inserts objects "<prefix>0000" .. with value 1.
func (f *fixture) insertN(prefix string, n int) statedb.Revision {
	objs := make([]*testObj, n)
	for i := range objs {
		objs[i] = &testObj{ID: fmt.Sprintf("%s%04d", prefix, i), Value: 1}
	}
	return f.insert(objs...)
}

func (f *fixture) delete(keys ...string) statedb.Revision {
	f.t.Helper()
	wtxn := f.db.WriteTxn(f.table)
	defer wtxn.Abort()
	for _, k := range keys {
		if _, _, err := f.table.Delete(wtxn, &testObj{ID: k}); err != nil {
			f.t.Fatalf("delete %s: %v", k, err)
		}
	}
	return f.table.Revision(wtxn.Commit())
}

func (f *fixture) get(key string) (*testObj, bool) {
	obj, _, found := f.table.Get(f.db.ReadTxn(), testIDIndex.Query(key))
	return obj, found
}

// waitTable waits until check holds for the table.
func (f *fixture) waitTable(what string, check func(txn statedb.ReadTxn) bool) {
	f.t.Helper()
	waitUntil(f.t, what, func() (bool, <-chan struct{}) {
		txn := f.db.ReadTxn()
		_, watch := f.table.AllWatch(txn)
		return check(txn), watch
	})
}

// waitStatus waits until key has status kind with an error containing
// substr.
func (f *fixture) waitStatus(key string, kind StatusKind, substr string) *testObj {
	f.t.Helper()
	var obj *testObj
	f.waitTable(fmt.Sprintf("%s to be %s %q", key, kind, substr), func(txn statedb.ReadTxn) bool {
		var found bool
		obj, _, found = f.table.Get(txn, testIDIndex.Query(key))
		return found && obj.Status.Kind == kind && strings.Contains(obj.Status.Error, substr)
	})
	return obj
}

// countStatus returns how many objects have status kind.
func (f *fixture) countStatus(kind StatusKind) int {
	n := 0
	for range f.table.List(f.db.ReadTxn(), testStatusIndex.Query(kind)) {
		n++
	}
	return n
}

// waitReconciled waits until every change so far was attempted.
func (f *fixture) waitReconciled() (statedb.Revision, error) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	want := f.table.Revision(f.db.ReadTxn())
	rev, err := f.rec.WaitUntilReconciled(ctx, want)
	if errors.Is(err, context.DeadlineExceeded) {
		f.t.Fatalf("WaitUntilReconciled(%d) timed out at %d", want, rev)
	}
	if err == nil && rev < want {
		f.t.Fatalf("WaitUntilReconciled(%d) returned revision %d", want, rev)
	}
	return rev, err
}

// mustReconcile waits until every change so far was attempted and none
// failed.
func (f *fixture) mustReconcile() {
	f.t.Helper()
	if _, err := f.waitReconciled(); err != nil {
		f.t.Fatalf("WaitUntilReconciled: %v", err)
	}
}
