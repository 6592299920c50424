package cell_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/steadystate/steadystate/hive/cell"
)

// recordingHealth records the reports of a scope and its children.
type recordingHealth struct {
	mu      *sync.Mutex
	name    string
	reports *[]string
}

func (h *recordingHealth) add(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.reports = append(*h.reports, h.name+": "+s)
}

func (h *recordingHealth) OK(status string)                { h.add("OK " + status) }
func (h *recordingHealth) Degraded(reason string, _ error) { h.add("Degraded " + reason) }
func (h *recordingHealth) Stopped(reason string)           { h.add("Stopped " + reason) }
func (h *recordingHealth) Close()                          {}
func (h *recordingHealth) NewScope(name string) cell.Health {
	return &recordingHealth{mu: h.mu, name: h.name + "." + name, reports: h.reports}
}

// A PendingScope drops reports until it is opened, then forwards them to
// the scope it opened under its parent.
func TestPendingScope(t *testing.T) {
	var reports []string
	var s cell.PendingScope
	s.OK("early")
	s.Open(&recordingHealth{mu: &sync.Mutex{}, name: "job", reports: &reports}, "reconciler")
	s.OK("running")
	s.Degraded("2 failing", nil)
	s.Stopped("done")
	want := []string{"job.reconciler: OK running", "job.reconciler: Degraded 2 failing", "job.reconciler: Stopped done"}
	if !slices.Equal(reports, want) {
		t.Fatalf("reports %q, want %q", reports, want)
	}
}
