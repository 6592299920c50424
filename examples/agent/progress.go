package main

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"time"

	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/job"
	"github.com/steadystate/steadystate/internal/shrink"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// The progress log shows what the agent does without drowning a large
// change in lines, per table:
//
//   - each object that reaches Done or Error, at Info while the change set
//     is small (at most smallChangeSet objects), else at Debug;
//   - on a change set still running after a second, a progress line once
//     a second: done n of N, rate, ETA;
//   - when a change set is fully applied (its deletions too: the
//     reconciler attempted every change), one summary line: "All N routes
//     reconciled" (or how many are in Error), with what was applied and
//     removed and how long it took.
//
// "Removed" lines come from the target's wrapper (recorded), once the
// kernel delete succeeded; drift repaired and leftovers pruned are the
// reconciler's own log lines and metrics (steadystate_reconciler_*).

// smallChangeSet is the largest change set whose objects are each logged
// at Info.
const smallChangeSet = 20

// progressInterval is how often a running change set logs its progress.
const progressInterval = time.Second

// notTriedKinds are the status kinds of objects whose desired version is
// still waiting for an attempt (a refresh is not new work).
var notTriedKinds = []reconciler.StatusKind{reconciler.StatusKindUnset, reconciler.StatusKindPending}

// changeSet is the work of one table since it was last fully applied.
type changeSet struct {
	start                 time.Time
	done, failed, removed int
	lastProgress          time.Time
	active                bool
}

// watchProgress logs the progress of one table's reconciler as a job.
func watchProgress[Obj any](jobs job.Group, db *statedb.DB, table statedb.Table[Obj], r reconciler.Reconciler[Obj],
	log *slog.Logger, getStatus func(Obj) reconciler.Status, started <-chan struct{}) error {
	wtxn := db.WriteTxn(table)
	changes, err := table.Changes(wtxn)
	wtxn.Commit()
	if err != nil {
		return err
	}
	return jobs.Add(job.OneShot("progress-"+table.Name(), func(ctx context.Context, _ cell.Health) error {
		defer changes.Close()
		ticker := time.NewTicker(progressInterval)
		defer ticker.Stop()
		var set changeSet
		// seen holds the keys seen, each marked waiting while it was last
		// seen waiting for an attempt: a Done or Error is news (logged,
		// counted) for a key that was waiting or is new, not after a
		// refresh. (One map, not one of each: a start of 60,000 objects
		// looks every key up three times.) A key is held as its 64-bit
		// hash: a start's 120,000 changes made a string of each key they
		// added, and the map took 4 MB. Two keys of one hash (at 10^6
		// keys, odds of 1 in 10^7) would only mislabel a line of this
		// log and shift its summary's counts by one, never a status.
		seen := map[uint64]bool{} // by key's hash: waiting
		seenPeak := 0             // see shrink.Map
		seed := maphash.MakeSeed()
		for {
			txn := db.ReadTxn()
			seq, watch := changes.Next(txn)
			// The objects still to try, through the table's status index:
			// no pass over the table on every change.
			pending := 0
			for _, n := range reconciler.CountByStatus(txn, table, getStatus, notTriedKinds...) {
				pending += n
			}
			// Whether the change set is small is known only once this
			// batch of changes is counted (the reconciler may have tried
			// all of a large set before the first look): its lines wait in
			// held until then, or until the set is known to be large.
			held := heldLines[Obj]{log: log}
			small := func() bool { return set.done+set.failed+pending <= smallChangeSet }
			for ch := range seq {
				key := maphash.Bytes(seed, table.PrimaryKey(ch.Object))
				wasWaiting, wasKnown := seen[key]
				st := getStatus(ch.Object)
				switch waiting := st.Kind == reconciler.StatusKindUnset || st.Kind == reconciler.StatusKindPending; {
				case ch.Deleted:
					delete(seen, key)
				case !wasKnown || waiting != wasWaiting:
					seen[key] = waiting
				}
				news := wasWaiting || !wasKnown
				switch {
				case ch.Deleted:
					set.removed++
					set.active = true
				case !news:
					// A refresh: the reconciler logs drift it repaired.
				case st.Kind == reconciler.StatusKindDone:
					set.active = true
					set.done++
					held.add(ctx, ch.Object, st, small())
				case st.Kind == reconciler.StatusKindError:
					set.active = true
					set.failed++
					held.add(ctx, ch.Object, st, small())
				default:
					set.active = true
				}
			}
			held.flush(ctx, small())
			seen = shrink.Map(seen, &seenPeak)
			if set.active && set.start.IsZero() {
				set.start = time.Now()
				set.lastProgress = set.start
			}
			if initialized, _ := table.Initialized(txn); initialized && set.active && pending == 0 {
				// Every object tried; wait for the deletions too.
				_, err := r.WaitUntilReconciled(ctx, table.Revision(txn))
				if ctx.Err() != nil {
					return nil
				}
				var nr *reconciler.NotReconciledError
				errors.As(err, &nr)
				summarize(log, table.Name(), table.NumObjects(db.ReadTxn()), set, nr)
				set = changeSet{}
			}
			// Until the first rounds are done, the changes are read once
			// a progress interval (and once at the end), not at every
			// commit: a start's 60,000 objects, each seen Pending and
			// then Done, cost 34 ms of CPU beside the start's own work;
			// read once, after it, the change feed gives each key once,
			// Done.
			changed := watch
			if started != nil {
				changed = nil
			}
			select {
			case <-ctx.Done():
				return nil
			case <-changed:
			case <-started:
				started = nil
			case now := <-ticker.C:
				if set.active && pending > 0 && now.Sub(set.lastProgress) >= progressInterval {
					set.lastProgress = now
					logProgress(log, table.Name(), set, pending, now)
				}
			}
		}
	}))
}

// heldLines are the "Done:" and "Error:" lines of a batch of changes,
// held until the change set is known to be small (logged at Info, errors
// at Warn) or large (at Debug).
type heldLines[Obj any] struct {
	log   *slog.Logger
	objs  []Obj
	sts   []reconciler.Status
	large bool // known to be large: lines go at Debug at once
}

// add holds the line of obj, or logs it at Debug once the set is large
// (small is false).
func (h *heldLines[Obj]) add(ctx context.Context, obj Obj, st reconciler.Status, small bool) {
	if !small && !h.large {
		h.large = true
		h.flush(ctx, false)
	}
	if h.large {
		logLine(ctx, h.log, slog.LevelDebug, obj, st)
		return
	}
	h.objs, h.sts = append(h.objs, obj), append(h.sts, st)
}

// flush logs the lines held, at Info (errors at Warn) if the set is small,
// else at Debug.
func (h *heldLines[Obj]) flush(ctx context.Context, small bool) {
	for i, obj := range h.objs {
		level := slog.LevelDebug
		if small {
			level = slog.LevelInfo
			if h.sts[i].Kind == reconciler.StatusKindError {
				level = slog.LevelWarn
			}
		}
		logLine(ctx, h.log, level, obj, h.sts[i])
	}
	h.objs, h.sts = h.objs[:0], h.sts[:0]
}

// logLine logs that obj reached st ("Done: ..." or "Error: ...").
func logLine(ctx context.Context, log *slog.Logger, level slog.Level, obj any, st reconciler.Status) {
	if !log.Enabled(ctx, level) {
		return
	}
	if st.Kind == reconciler.StatusKindError {
		log.Log(ctx, level, "Error: "+describe(obj), "error", st.Error)
		return
	}
	log.Log(ctx, level, "Done: "+describe(obj))
}

// logProgress logs "routes: 4000 of 10000 applied" with rate and ETA.
func logProgress(log *slog.Logger, table string, set changeSet, pending int, now time.Time) {
	tried := set.done + set.failed
	elapsed := now.Sub(set.start)
	rate := float64(tried) / elapsed.Seconds()
	attrs := []any{"rate", fmt.Sprintf("%.0f/s", rate)}
	if rate > 0 {
		attrs = append(attrs, "eta", (time.Duration(float64(pending) / rate * float64(time.Second))).Round(time.Second).String())
	}
	log.Info(fmt.Sprintf("Applying %s: %d of %d", table, tried, tried+pending), attrs...)
}

// summarize logs the end of a change set.
func summarize(log *slog.Logger, table string, objects int, set changeSet, nr *reconciler.NotReconciledError) {
	attrs := []any{"applied", set.done, "removed", set.removed, "took", time.Since(set.start).Round(time.Millisecond).String()}
	if nr == nil {
		log.Info(fmt.Sprintf("All %d %s reconciled", objects, table), attrs...)
		return
	}
	log.Warn(fmt.Sprintf("%d %s tried, some failed and are retried", objects, table), append(attrs, "failing", nr.Error())...)
}
