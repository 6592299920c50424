package reconciler

import (
	"slices"
	"sync"
	"time"
)

// FoundBy says how drift was found.
type FoundBy string

// The ways drift is found.
const (
	// FoundByRefresh: a refresh by age (Config.RefreshInterval).
	FoundByRefresh FoundBy = "refresh"
	// FoundByEvent: the target reported it (DriftTarget).
	FoundByEvent FoundBy = "event"
	// FoundByPrune: a prune's plan put desired state back (a Change with
	// Repair set).
	FoundByPrune FoundBy = "prune"
)

// Repair is one repair of drift: an object whose real state was found
// changed behind the reconciler's back, and put back. Every repair is
// counted (Metrics.DriftRepaired) and handed to Config.OnRepair; the first
// ten of a round are logged one by one ("Drift repaired"), the rest in one
// line at the round's end.
type Repair struct {
	// Object names the object: its String(), or its primary key; for a
	// prune's repair, the Object of the change.
	Object string `json:"object" yaml:"object"`
	// Changes is what the repair changed: the object's plan.
	Changes Plan `json:"changes" yaml:"changes"`
	// FoundBy is how the drift was found.
	FoundBy FoundBy `json:"foundBy" yaml:"foundBy"`
	// At is when the repair succeeded.
	At time.Time `json:"at" yaml:"at"`
}

// repaired records the repair of w's drift, found as w.found says: w's
// plan is what the repair changed. Called once its operation succeeded.
func (r *reconciler[Obj]) repaired(w *work[Obj], now time.Time) {
	found := w.found
	if found == "" {
		found = FoundByRefresh
	}
	r.recordRepair(Repair{Object: describe(r.cfg.Table, w.obj), Changes: w.plan, FoundBy: found, At: now})
}

// recordRepair logs, counts and hands on one repair.
func (r *reconciler[Obj]) recordRepair(rep Repair) {
	if r.roundLog.repair() {
		r.cfg.Logger.Info("Drift repaired", "object", rep.Object, "changes", rep.Changes.String(), "foundBy", rep.FoundBy)
	}
	r.cfg.Metrics.DriftRepaired(r.cfg.Name, r.tableName, 1)
	if r.cfg.OnRepair != nil {
		r.cfg.OnRepair(rep)
	}
}

// splitPrunePlan returns the changes of a prune's plan that remove
// leftovers and those that put desired state back (Change.Repair).
func splitPrunePlan(p Plan) (leftovers, repairs Plan) {
	for _, c := range p {
		if c.Repair {
			repairs = append(repairs, c)
		} else {
			leftovers = append(leftovers, c)
		}
	}
	return leftovers, repairs
}

// RepairLog keeps the latest repairs, for a status report: set
// Config.OnRepair to its Add. It is safe for concurrent use; the zero
// value keeps DefaultRepairLogSize.
type RepairLog struct {
	// Size is how many repairs it keeps; 0 means DefaultRepairLogSize.
	Size int

	mu      sync.Mutex
	repairs []Repair // oldest first
	total   int
}

// DefaultRepairLogSize is how many repairs a RepairLog keeps by default.
const DefaultRepairLogSize = 5

// Add records rep, dropping the oldest repair beyond Size.
func (l *RepairLog) Add(rep Repair) {
	size := l.Size
	if size <= 0 {
		size = DefaultRepairLogSize
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total++
	l.repairs = append(l.repairs, rep)
	if n := len(l.repairs) - size; n > 0 {
		l.repairs = slices.Delete(l.repairs, 0, n)
	}
}

// Latest returns the repairs kept, newest first, and how many were added
// in all.
func (l *RepairLog) Latest() (latest []Repair, total int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	latest = slices.Clone(l.repairs)
	slices.Reverse(latest)
	return latest, l.total
}
