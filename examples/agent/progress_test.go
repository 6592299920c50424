package main

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/steadystate/steadystate/reconciler"
)

// The progress line and the summary of a change set, as a user reads them.
func TestProgressLines(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	start := time.Now().Add(-2 * time.Second)
	set := changeSet{start: start, done: 3990, failed: 10, removed: 5, active: true}
	logProgress(log, "routes", set, 6000, start.Add(2*time.Second))
	summarize(log, "routes", 10000, set, nil)
	summarize(log, "routes", 10000, set, &reconciler.NotReconciledError{Reconciler: "routes", Failing: 10})
	got := buf.String()
	for _, want := range []string{
		`level=INFO msg="Applying routes: 4000 of 10000" rate=2000/s eta=3s`,
		`level=INFO msg="All 10000 routes reconciled" applied=3990 removed=5 took=2`,
		`level=WARN msg="10000 routes tried, some failed and are retried" applied=3990 removed=5`,
		`10 objects failing`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
	if smallChangeSet != 20 || progressInterval != time.Second {
		t.Errorf("smallChangeSet %d, progressInterval %v: documented as 20 and 1s", smallChangeSet, progressInterval)
	}
}

// A change set is logged object by object at Info only while it is
// small, however the objects' results arrive: 25 Done in one batch are
// Debug lines (the reconciler tried them all before the first look), 3
// are Info lines and an Error among them a Warn line.
func TestHeldLines(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx := t.Context()
	run := func(n int, failing string) string {
		buf.Reset()
		held := heldLines[string]{log: log}
		for i := range n {
			name := "obj" + string(rune('a'+i%26))
			st := reconciler.StatusDone()
			if name == failing {
				st = reconciler.StatusError(errors.New("boom"))
			}
			held.add(ctx, name, st, i+1 <= smallChangeSet)
		}
		held.flush(ctx, n <= smallChangeSet)
		return buf.String()
	}
	if out := run(25, ""); strings.Count(out, "level=DEBUG msg=\"Done: ") != 25 || strings.Contains(out, "level=INFO") {
		t.Errorf("a set of 25: want 25 Debug lines, no Info:\n%s", out)
	}
	out := run(3, "objb")
	if strings.Count(out, "level=INFO msg=\"Done: ") != 2 || !strings.Contains(out, `level=WARN msg="Error: objb" error=boom`) {
		t.Errorf("a set of 3 with an error: want 2 Info lines and a Warn:\n%s", out)
	}
}
