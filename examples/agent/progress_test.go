package main

import (
	"bytes"
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
