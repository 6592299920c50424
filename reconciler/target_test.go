package reconciler

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/statedb"
)

// This file holds the test doubles: the desired object, a Target that
// records its operations and misbehaves on demand (testTarget, and
// testBatchTarget for the BatchTarget path), and recorders of health and
// metrics. Everything records under a mutex and wakes waiters through a
// channel, so tests wait for conditions instead of sleeping.

// testObj is the desired object of the tests: a key, a value for the real
// system and the reconciliation status.
type testObj struct {
	ID     string
	Value  int
	Status Status
}

func (o *testObj) String() string { return fmt.Sprintf("%s=%d(%s)", o.ID, o.Value, o.Status) }

var testIDIndex = statedb.Index[*testObj, string]{
	Name:       "id",
	FromObject: func(o *testObj) index.KeySet { return index.NewKeySet(index.String(o.ID)) },
	FromKey:    index.String,
	Unique:     true,
}

var testStatusIndex = StatusIndex(getTestStatus)

func getTestStatus(o *testObj) Status { return o.Status }

func setTestStatus(o *testObj, s Status) *testObj { o.Status = s; return o }

func cloneTestObj(o *testObj) *testObj { c := *o; return &c }

// newTestTable returns a db with a table "objs" indexed by id and status.
func newTestTable(t testing.TB) (*statedb.DB, statedb.RWTable[*testObj]) {
	t.Helper()
	db := statedb.New()
	tbl, err := statedb.NewTable(db, "objs", testIDIndex, testStatusIndex)
	if err != nil {
		t.Fatal(err)
	}
	return db, tbl
}

// testConfig is a valid config for tbl and target with fast retries.
func testConfig(tbl statedb.RWTable[*testObj], target Target[*testObj]) Config[*testObj] {
	return Config[*testObj]{
		Name:            "test",
		Table:           tbl,
		Target:          target,
		GetObjectStatus: getTestStatus,
		SetObjectStatus: setTestStatus,
		CloneObject:     cloneTestObj,
		RetryBackoffMin: time.Millisecond,
		RetryBackoffMax: 10 * time.Millisecond,
	}
}

// waitTimeout bounds every wait of the tests; generous, for a loaded
// machine under -race. A healthy run never comes close.
const waitTimeout = 20 * time.Second

// waitUntil waits until check reports true. check also returns a channel
// that closes when its answer may have changed.
func waitUntil(t testing.TB, what string, check func() (bool, <-chan struct{})) {
	t.Helper()
	timeout := time.NewTimer(waitTimeout)
	defer timeout.Stop()
	for {
		ok, ch := check()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-timeout.C:
			t.Fatalf("timed out after %v waiting for %s", waitTimeout, what)
		}
	}
}

// notifier lets recorders wake waiters: wake closes the current channel.
// Callers hold their own mutex around both methods.
type notifier struct{ ch chan struct{} }

func (n *notifier) watch() <-chan struct{} {
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

func (n *notifier) wake() {
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
}

// behavior is how the test target treats one object key.
type behavior struct {
	failN    int           // fail the next failN operations, then succeed
	forever  bool          // fail every operation
	terminal bool          // fail every operation with a Terminal error
	panics   bool          // panic in every operation
	hang     bool          // block until ctx is done, or until release closes
	release  chan struct{} // nil: hang until ctx is done
}

// errInjected is the error of every injected failure.
var errInjected = errors.New("injected failure")

// testTarget is a fake real system: a map from key to value. It records
// every operation in order as "update(k=v)", "delete(k)" or "prune", failed
// ones included, and fails, hangs or panics per key on demand.
type testTarget struct {
	mu        sync.Mutex
	n         notifier
	ops       []string
	real      map[string]int
	behaviors map[string]*behavior
	held      int // operations currently blocked in hang
	pruneFail int // fail the next pruneFail prunes
	batches   []string
}

func newTestTarget() *testTarget {
	return &testTarget{real: map[string]int{}, behaviors: map[string]*behavior{}}
}

// set replaces the behavior of key (nil: behave).
func (t *testTarget) set(key string, b *behavior) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if b == nil {
		delete(t.behaviors, key)
	} else {
		t.behaviors[key] = b
	}
}

// hold makes operations on key block until the returned release is called.
func (t *testTarget) hold(key string) (release func()) {
	ch := make(chan struct{})
	t.set(key, &behavior{hang: true, release: ch})
	return sync.OnceFunc(func() {
		t.mu.Lock()
		if b := t.behaviors[key]; b != nil && b.release == ch {
			delete(t.behaviors, key) // unless a later hold replaced it
		}
		t.mu.Unlock()
		close(ch)
	})
}

func (t *testTarget) failPrunes(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pruneFail = n
}

func (t *testTarget) Update(ctx context.Context, _ statedb.ReadTxn, obj *testObj) error {
	return t.op(ctx, obj, false)
}

func (t *testTarget) Delete(ctx context.Context, _ statedb.ReadTxn, obj *testObj) error {
	return t.op(ctx, obj, true)
}

func (t *testTarget) op(ctx context.Context, obj *testObj, del bool) error {
	t.mu.Lock()
	if del {
		t.recordLocked(fmt.Sprintf("delete(%s)", obj.ID))
	} else {
		t.recordLocked(fmt.Sprintf("update(%s=%d)", obj.ID, obj.Value))
	}
	if err := ctx.Err(); err != nil {
		// A real target's calls fail once their context is done.
		t.mu.Unlock()
		return err
	}
	var err error
	if b := t.behaviors[obj.ID]; b != nil {
		switch {
		case b.panics:
			t.mu.Unlock()
			panic(fmt.Sprintf("boom on %s", obj.ID))
		case b.hang:
			t.held++
			t.n.wake()
			t.mu.Unlock()
			select {
			case <-ctx.Done():
				err = ctx.Err()
			case <-b.release: // a nil release blocks forever
			}
			t.mu.Lock()
			t.held--
		case b.terminal:
			err = Terminal(fmt.Errorf("%w of %s (terminal)", errInjected, obj.ID))
		case b.forever:
			err = fmt.Errorf("%w of %s", errInjected, obj.ID)
		case b.failN > 0:
			b.failN--
			err = fmt.Errorf("%w of %s", errInjected, obj.ID)
		}
	}
	if err == nil {
		if del {
			delete(t.real, obj.ID)
		} else {
			t.real[obj.ID] = obj.Value
		}
	}
	t.n.wake()
	t.mu.Unlock()
	return err
}

func (t *testTarget) Prune(ctx context.Context, _ statedb.ReadTxn, desired iter.Seq2[*testObj, statedb.Revision]) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.recordLocked("prune")
	if t.pruneFail > 0 {
		t.pruneFail--
		return fmt.Errorf("%w of prune", errInjected)
	}
	keep := map[string]bool{}
	for obj := range desired {
		keep[obj.ID] = true
	}
	for k := range t.real {
		if !keep[k] {
			delete(t.real, k)
		}
	}
	return nil
}

func (t *testTarget) recordLocked(op string) {
	t.ops = append(t.ops, op)
	t.n.wake()
}

// opsList returns a copy of the operations so far.
func (t *testTarget) opsList() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.ops)
}

// count returns how many recorded operations start with prefix.
func (t *testTarget) count(prefix string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, op := range t.ops {
		if strings.HasPrefix(op, prefix) {
			n++
		}
	}
	return n
}

// setReal changes the real system behind the reconciler's back (drift).
func (t *testTarget) setReal(key string, value int, present bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if present {
		t.real[key] = value
	} else {
		delete(t.real, key)
	}
}

func (t *testTarget) realState() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.real)
}

// watch runs check on the target under its lock.
func (t *testTarget) watch(check func(t *testTarget) bool) func() (bool, <-chan struct{}) {
	return func() (bool, <-chan struct{}) {
		t.mu.Lock()
		defer t.mu.Unlock()
		return check(t), t.n.watch()
	}
}

// testBatchTarget is testTarget with the BatchTarget interface. It applies
// each entry like testTarget does (so a panic fails the whole batch) and
// records the size of every batch as "update[n]" or "delete[n]".
type testBatchTarget struct{ *testTarget }

func (b testBatchTarget) UpdateBatch(ctx context.Context, txn statedb.ReadTxn, batch []BatchEntry[*testObj]) {
	b.batch(ctx, "update", batch, false)
}

func (b testBatchTarget) DeleteBatch(ctx context.Context, txn statedb.ReadTxn, batch []BatchEntry[*testObj]) {
	b.batch(ctx, "delete", batch, true)
}

func (b testBatchTarget) batch(ctx context.Context, name string, batch []BatchEntry[*testObj], del bool) {
	b.mu.Lock()
	b.batches = append(b.batches, fmt.Sprintf("%s[%d]", name, len(batch)))
	b.mu.Unlock()
	for i := range batch {
		batch[i].Result = b.op(ctx, batch[i].Object, del)
	}
}

func (b testBatchTarget) batchList() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.batches)
}

var (
	_ Target[*testObj]      = (*testTarget)(nil)
	_ BatchTarget[*testObj] = testBatchTarget{}
)

// healthReport is one call on a Health.
type healthReport struct {
	level  string // "OK", "Degraded" or "Stopped"
	reason string
	err    error
}

// recordingHealth records every health report.
type recordingHealth struct {
	mu      sync.Mutex
	n       notifier
	reports []healthReport
	seen    int // reports before this one were matched by waitFor
}

func (h *recordingHealth) add(r healthReport) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reports = append(h.reports, r)
	h.n.wake()
}

func (h *recordingHealth) OK(status string) { h.add(healthReport{"OK", status, nil}) }
func (h *recordingHealth) Degraded(reason string, err error) {
	h.add(healthReport{"Degraded", reason, err})
}
func (h *recordingHealth) Stopped(reason string) { h.add(healthReport{"Stopped", reason, nil}) }

func (h *recordingHealth) last() healthReport {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.reports) == 0 {
		return healthReport{}
	}
	return h.reports[len(h.reports)-1]
}

// waitFor waits until a report made since the last match (or the latest
// report) satisfies check. Looking at every report, not only the latest,
// keeps a short-lived state (Degraded until a quick retry succeeds) from
// being missed.
func (h *recordingHealth) waitFor(t testing.TB, what string, check func(healthReport) bool) healthReport {
	t.Helper()
	var got healthReport
	waitUntil(t, what, func() (bool, <-chan struct{}) {
		h.mu.Lock()
		defer h.mu.Unlock()
		from := min(h.seen, max(len(h.reports)-1, 0))
		for i := from; i < len(h.reports); i++ {
			if check(h.reports[i]) {
				got = h.reports[i]
				h.seen = i + 1
				return true, h.n.watch()
			}
		}
		return false, h.n.watch()
	})
	return got
}

// recordingMetrics records the gauges and counts the operations.
type recordingMetrics struct {
	mu      sync.Mutex
	n       notifier
	errors  int
	retries int
	ops     map[Operation]int // objects handled, by operation
	failed  map[Operation]int
	prunes  int
	fulls   int
}

func newRecordingMetrics() *recordingMetrics {
	return &recordingMetrics{ops: map[Operation]int{}, failed: map[Operation]int{}}
}

func (m *recordingMetrics) OperationDone(_ string, op Operation, _ time.Duration, n, errors int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ops[op] += n
	m.failed[op] += errors
	m.n.wake()
}

func (m *recordingMetrics) FullReconciliationDone(string, time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fulls++
	m.n.wake()
}

func (m *recordingMetrics) PruneDone(string, time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.prunes++
	m.n.wake()
}

func (m *recordingMetrics) Errors(_ string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.errors = n
	m.n.wake()
}

func (m *recordingMetrics) QueuedRetries(_ string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.retries = n
	m.n.wake()
}

func (m *recordingMetrics) watch(check func(m *recordingMetrics) bool) func() (bool, <-chan struct{}) {
	return func() (bool, <-chan struct{}) {
		m.mu.Lock()
		defer m.mu.Unlock()
		return check(m), m.n.watch()
	}
}
