package reconciler

import (
	"fmt"
	"slices"
	"strings"
)

// maxRecentErrors is how many of the latest failures the health report
// names.
const maxRecentErrors = 10

// healthState is what was last reported, to report only on change.
type healthState struct {
	reported bool
	failing  int
	objects  int
	pruneErr error
	stuck    int
	watchErr error // of the drift watch
}

// recentFailure is one of the latest failures, for the health report.
type recentFailure struct {
	key  string // primary key
	name string // how the object is shown: its String() if it has one
}

// noteFailure records obj (with primary key key) as the latest failure.
func (r *reconciler[Obj]) noteFailure(key string, obj Obj) {
	if i := slices.IndexFunc(r.recent, func(f recentFailure) bool { return f.key == key }); i >= 0 {
		r.recent = slices.Delete(r.recent, i, i+1)
	}
	name := fmt.Sprintf("%q", key)
	if s, ok := any(obj).(fmt.Stringer); ok {
		name = s.String()
	}
	r.recent = append(r.recent, recentFailure{key: key, name: name})
	if len(r.recent) > maxRecentErrors {
		r.recent = slices.Delete(r.recent, 0, len(r.recent)-maxRecentErrors)
	}
}

// failure returns the current error of key, if it is failing.
func (r *reconciler[Obj]) failure(key string) (error, bool) {
	if err, ok := r.terminal[key]; ok {
		return err, true
	}
	if it, ok := r.retries.get(key); ok {
		return it.err, true
	}
	return nil, false
}

// named returns "name: err", or err's message alone when it names the
// object already (targets' errors often do).
func named(name string, err error) string {
	if msg := err.Error(); strings.HasPrefix(msg, name) {
		return msg
	}
	return fmt.Sprintf("%s: %v", name, err)
}

// reportHealth reports OK with the object count, or Degraded with the number
// of failing objects and the latest errors (at most 10), and updates the
// error metrics.
func (r *reconciler[Obj]) reportHealth(force bool) {
	failing := r.numFailing()
	objects := r.cfg.Table.NumObjects(r.db.ReadTxn()) // O(1)
	stuck := r.exec.numStuck()
	watchErr := r.drift.err()
	h := &r.health
	if !force && h.reported && failing == h.failing && objects == h.objects && r.pruning.err == h.pruneErr && stuck == h.stuck && watchErr == h.watchErr {
		return
	}
	h.reported, h.failing, h.objects, h.pruneErr, h.stuck, h.watchErr = true, failing, objects, r.pruning.err, stuck, watchErr
	r.cfg.Metrics.Errors(r.cfg.Name, r.tableName, failing)
	r.cfg.Metrics.QueuedRetries(r.cfg.Name, r.tableName, r.retries.len())
	r.cfg.Metrics.StuckOperations(r.cfg.Name, r.tableName, stuck)
	if r.cfg.Health == nil {
		return
	}
	if failing == 0 && r.pruning.err == nil && stuck == 0 && watchErr == nil {
		r.cfg.Health.OK(fmt.Sprintf("%d objects reconciled", objects))
		return
	}
	var lines []string
	var latest error
	for i := len(r.recent) - 1; i >= 0; i-- {
		if err, ok := r.failure(r.recent[i].key); ok {
			lines = append(lines, named(r.recent[i].name, err))
			if latest == nil {
				latest = err
			}
		}
	}
	if r.pruning.err != nil {
		latest = r.pruning.err
		lines = append([]string{r.pruning.err.Error()}, lines...)
	}
	reason := fmt.Sprintf("%d of %d objects failing", failing, objects)
	if len(lines) > 0 {
		reason += "; latest: " + strings.Join(lines, "; ")
	}
	if watchErr != nil {
		// Not an object's failure: drift is not seen until it works again.
		reason = watchErr.Error() + "; " + reason
		latest = watchErr
	}
	if stuck > 0 {
		ops := r.exec.stuckOps()
		reason += fmt.Sprintf("; %d operations stuck (ignoring their context): %s", stuck, strings.Join(ops, "; "))
		if latest == nil {
			latest = fmt.Errorf("%w: %s", ErrOperationAbandoned, ops[0])
		}
	}
	r.cfg.Health.Degraded(reason, latest)
}
