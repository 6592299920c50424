package reconciler_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
)

// An object that fails and then succeeds is logged once at Info, "Done
// after N failures: OBJ" with N its failures in a row, and leaves health:
// the report after it is OK and names nothing. A terminal failure ended
// by a new version counts too; a failing object that is deleted is not
// "Done", and an object that never failed logs no such line.
func TestRecoveryLogged(t *testing.T) {
	f := newFixture(t, false)
	logs := &logRecorder{}
	f.cfg.Logger = slog.New(logs)
	f.start()

	f.target.Inject("a", reconcilertest.Fault{Times: 2})
	f.target.Inject("b", reconcilertest.Fault{Times: 1})
	f.target.Inject("t", reconcilertest.Fault{Times: 1, Terminal: true})
	f.target.Inject("gone", reconcilertest.Fault{})
	f.insert(&testObj{ID: "a", Value: 1}, &testObj{ID: "b", Value: 1}, &testObj{ID: "t", Value: 1},
		&testObj{ID: "gone", Value: 1}, &testObj{ID: "ok", Value: 1})
	f.waitStatus("a", reconciler.StatusKindDone, "")
	f.waitStatus("b", reconciler.StatusKindDone, "")
	r := f.health.WaitFor(t, reconcilertest.LevelDegraded, "2 of 5 objects failing")
	if !strings.Contains(r.Reason, "t=1") || !strings.Contains(r.Reason, "gone=1") || strings.Contains(r.Reason, "a=1") {
		t.Fatalf("Degraded report %q: want t=1 and gone=1 named, a=1 not", r.Reason)
	}

	// A new version ends the terminal failure; the deleted object's
	// failures end with its delete (cleared once no update of it can run:
	// a delete is under way).
	f.delete("gone")
	f.target.WaitUntil(t, "a delete of gone", func() bool { return f.target.Count(reconciler.OpDelete, "gone") > 0 })
	f.target.Clear("gone")
	f.insert(&testObj{ID: "t", Value: 2})
	f.health.WaitFor(t, reconcilertest.LevelOK, "4 objects reconciled")
	// More work after the recoveries logs nothing more.
	f.insert(&testObj{ID: "a", Value: 3}, &testObj{ID: "ok", Value: 3})
	f.mustReconcile()

	r, _ = f.health.Last()
	if r.Level != reconcilertest.LevelOK || r.Reason != "4 objects reconciled" {
		t.Errorf("health after the recoveries: %v, want OK naming no object", r)
	}
	want := []string{
		"INFO Done after 1 failure: b=1 failures=1",
		"INFO Done after 1 failure: t=2 failures=1",
		"INFO Done after 2 failures: a=1 failures=2",
	}
	got := logs.matching("Done after")
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("recovery lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// logRecorder is a slog.Handler that keeps every record as one line:
// "LEVEL message key=value ...".
type logRecorder struct {
	mu    sync.Mutex
	lines []string

	// round, if set, numbers the round each line was logged in (rounds
	// holds the numbers, one per line).
	round  func() int
	rounds []int
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
	if l.round != nil {
		l.rounds = append(l.rounds, l.round())
	}
	return nil
}

func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

// matching returns the lines that contain substr.
func (l *logRecorder) matching(substr string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return out
}

// A round logs ten recoveries one by one at most, and the rest as one
// count when it ends: 25 objects that failed once and then succeed log,
// in each round, at most ten lines and "N more objects" for the rest, and
// every object once. The target is a batch target so that each round is
// one recorded batch: a line belongs to the round of the batches so far
// when it was logged (a round logs after its batch, before the next).
func TestRecoveryLogBounded(t *testing.T) {
	f := newFixture(t, true)
	logs := &logRecorder{}
	logs.round = func() int { return len(f.target.Batches()) }
	f.cfg.Logger = slog.New(logs)
	f.start()

	var objs []*testObj
	for i := range 25 {
		id := fmt.Sprintf("o%02d", i)
		f.target.Inject(id, reconcilertest.Fault{Times: 1})
		objs = append(objs, &testObj{ID: id, Value: 1})
	}
	f.insert(objs...)
	for _, o := range objs {
		f.waitStatus(o.ID, reconciler.StatusKindDone, "")
	}
	f.mustReconcile()

	type round struct{ one, counted, summaries int }
	rounds := map[int]*round{}
	total := 0
	logs.mu.Lock()
	for i, l := range logs.lines {
		r := rounds[logs.rounds[i]]
		if r == nil {
			r = &round{}
			rounds[logs.rounds[i]] = r
		}
		switch {
		case strings.HasPrefix(l, "INFO Done after 1 failure: o"):
			r.one++
			total++
		case strings.HasPrefix(l, "INFO Done after failures:"):
			var n, all int
			var noun string
			if _, err := fmt.Sscanf(l, "INFO Done after failures: %d more %s (the first 10 logged one by one) objects=%d", &n, &noun, &all); err != nil {
				t.Fatalf("summary line %q: %v", l, err)
			}
			if want := map[bool]string{true: "object", false: "objects"}[n == 1]; noun != want {
				t.Errorf("summary line %q: %q after %d, want %q", l, noun, n, want)
			}
			if all != n+10 {
				t.Errorf("summary line %q: objects=%d, want the %d more and the 10 logged", l, all, n)
			}
			r.counted += n
			r.summaries++
			total += n
		}
	}
	logs.mu.Unlock()
	if total != 25 {
		t.Fatalf("%d recoveries logged or counted, want 25", total)
	}
	for n, r := range rounds {
		if r.one > 10 || r.summaries > 1 || (r.summaries == 1) != (r.one == 10 && r.counted > 0) {
			t.Errorf("round after batch %d: %d lines one by one, %d counted in %d summaries: want at most 10 one by one and the rest in one summary", n, r.one, r.counted, r.summaries)
		}
	}
	t.Logf("25 recoveries in %d rounds", len(rounds))
}
