package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/steadystate/steadystate/examples/iptables"
	"github.com/steadystate/steadystate/examples/routes"
	"github.com/steadystate/steadystate/examples/sysctl"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/job"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/statedb"
)

// loader keeps the three tables in line with the desired-state file. It is
// their only writer of desired objects.
type loader struct {
	cfg     AgentConfig
	db      *statedb.DB
	sysctls statedb.RWTable[*sysctl.Sysctl]
	routes  statedb.RWTable[*routes.Route]
	rules   statedb.RWTable[*iptables.Rule]
	log     *slog.Logger
	health  cell.Health // the scope "desired-file": the file's state
	metrics *loaderMetrics
	reload  chan struct{} // Reload: read the file now

	// Owned by the watch job's goroutine.
	initDone []func(statedb.WriteTxn) // until the first good load
	lastSum  [sha256.Size]byte        // the last version applied or rejected
	lastErr  string

	firstApplied *firstLoad // for /readyz
}

type loaderParams struct {
	cell.In

	Config     AgentConfig
	DB         *statedb.DB
	Sysctls    statedb.RWTable[*sysctl.Sysctl]
	Routes     statedb.RWTable[*routes.Route]
	Rules      statedb.RWTable[*iptables.Rule]
	Jobs       job.Group
	Health     cell.Health
	Log        *slog.Logger
	Registerer prometheus.Registerer
	FirstLoad  *firstLoad
}

// newLoader registers an initializer on each table, so that nothing is
// pruned before the first good load, and adds the loader as a job that
// watches the file (see watchFile) and loads it at start and whenever it
// changed. The file's state (loaded, or rejected and why) is the health
// scope "desired-file" of the module.
//
// It exists in file mode only (fleet mode's cell fills the tables then).
func newLoader(p loaderParams) (*loader, error) {
	l := &loader{cfg: p.Config, db: p.DB, sysctls: p.Sysctls, routes: p.Routes, rules: p.Rules, log: p.Log,
		health: p.Health.NewScope("desired-file"), reload: make(chan struct{}, 1), firstApplied: p.FirstLoad}
	m, err := newLoaderMetrics(p.Registerer)
	if err != nil {
		return nil, err
	}
	l.metrics = m
	wtxn := p.DB.WriteTxn(p.Sysctls, p.Routes, p.Rules)
	l.initDone = []func(statedb.WriteTxn){
		p.Sysctls.RegisterInitializer(wtxn, "desired-file"),
		p.Routes.RegisterInitializer(wtxn, "desired-file"),
		p.Rules.RegisterInitializer(wtxn, "desired-file"),
	}
	wtxn.Commit()
	return l, p.Jobs.Add(job.OneShot("watch-desired", func(ctx context.Context, health cell.Health) error {
		return watchFile(ctx, l.cfg.Desired, l.cfg.SettleTime, l.cfg.ReloadInterval, l.reload, health, l.log, l.load)
	}))
}

// Reload asks for the file to be read now (SIGHUP in daemon use).
func (l *loader) Reload() {
	select {
	case l.reload <- struct{}{}:
	default:
	}
}

// firstLoad closes its channel once a desired file was applied to the
// tables. It is a value of its own, so that the status API depends on it
// and not on the loader: the loader's job must start after the namespace
// and the state record (the hive starts hooks in construction order).
// In fleet mode, the status reporter closes it once every table was
// listed from etcd.
type firstLoad struct {
	done chan struct{}
	once sync.Once
}

func newFirstLoad() *firstLoad { return &firstLoad{done: make(chan struct{})} }

// Done returns the channel.
func (f *firstLoad) Done() <-chan struct{} { return f.done }

// close closes the channel (again: no effect).
func (f *firstLoad) close() { f.once.Do(func() { close(f.done) }) }

// load reads the file and, if it changed, applies it, but only a whole
// file: one quiet for the settle time, not open for writing, and the same
// after parsing as before (see watchFile). It returns true when the file
// was not ready, to be called again after the settle time. A file that
// cannot be read, parsed or validated is reported (in the log once, and in
// the health scope as long as it stays) and changes nothing.
func (l *loader) load() (retry bool) {
	path := l.cfg.Desired
	first, writing, err := readSnapshot(path)
	if err != nil {
		l.lastSum = [sha256.Size]byte{} // the same file back is news
		l.reject(fmt.Errorf("reading desired state: %w", err))
		return false
	}
	if age := time.Since(first.info.ModTime()); writing || (age >= 0 && age < l.cfg.SettleTime) {
		l.metrics.deferred.Inc()
		return true
	}
	sum := sha256.Sum256(first.data)
	if sum == l.lastSum && l.initDone == nil {
		return false
	}
	f, err := decodeDesired(path, first.data)
	if err == nil {
		err = l.validate(f)
	}
	// Parsing took time: what was parsed must still be the whole file.
	again, writing, againErr := readSnapshot(path)
	if againErr != nil || writing || !first.same(again) {
		l.metrics.deferred.Inc()
		return true
	}
	l.lastSum = sum // report once per version of the file
	if err != nil {
		l.reject(err)
		return false
	}
	changed, err := l.apply(f)
	if err != nil {
		l.lastSum = [sha256.Size]byte{}
		l.reject(fmt.Errorf("%s: applying: %w", path, err))
		return false
	}
	l.lastErr = ""
	l.metrics.loads.WithLabelValues(loadApplied).Inc()
	l.metrics.lastApplied.SetToCurrentTime()
	msg := fmt.Sprintf("loaded %s: %d sysctls, %d routes, %d rules", path, len(f.Sysctls), len(f.Routes), len(f.Rules))
	l.health.OK(msg)
	l.log.Info("Desired state loaded", "file", path, "sysctls", len(f.Sysctls), "routes", len(f.Routes), "rules", len(f.Rules), "changed", changed)
	return false
}

// reject reports a file that is not applied: health Degraded, counted,
// logged once per distinct problem.
func (l *loader) reject(err error) {
	if err.Error() == l.lastErr {
		return
	}
	l.lastErr = err.Error()
	l.metrics.loads.WithLabelValues(loadRejected).Inc()
	l.health.Degraded(fmt.Sprintf("desired state in %s rejected; keeping the current desired state", l.cfg.Desired), err)
	l.log.Error("Desired state rejected; keeping the current desired state", "file", l.cfg.Desired, "error", err)
}

func (l *loader) validate(f *desiredFile) error { return validateDesired(l.cfg.Desired, f) }

// validateDesired validates every entry of a decoded desired file (read
// from path) and finds duplicates: the loader's check, and `fleet apply`'s.
func validateDesired(path string, f *desiredFile) error {
	var errs []error
	errs = append(errs, validateAll("sysctls", f.Sysctls, sysctlKey)...)
	errs = append(errs, validateAll("routes", f.Routes, routeKey)...)
	errs = append(errs, validateAll("rules", f.Rules, ruleKey)...)
	if len(errs) > 0 {
		return fmt.Errorf("%s: %w", path, errors.Join(errs...))
	}
	return nil
}

// apply makes the tables hold exactly the file's objects, in one
// transaction. Unchanged objects are not written (so not reconciled again).
func (l *loader) apply(f *desiredFile) (changed int, err error) {
	wtxn := l.db.WriteTxn(l.sysctls, l.routes, l.rules)
	defer wtxn.Abort()
	n1, err1 := syncTable(wtxn, l.sysctls, f.Sysctls, (*sysctl.Sysctl).Equal, (*sysctl.Sysctl).SetStatus)
	n2, err2 := syncTable(wtxn, l.routes, f.Routes, (*routes.Route).Equal, (*routes.Route).SetStatus)
	n3, err3 := syncTable(wtxn, l.rules, f.Rules, (*iptables.Rule).Equal, (*iptables.Rule).SetStatus)
	if err := errors.Join(err1, err2, err3); err != nil {
		return 0, err
	}
	first := l.initDone != nil
	for _, done := range l.initDone {
		done(wtxn)
	}
	l.initDone = nil
	wtxn.Commit()
	if first && l.firstApplied != nil {
		l.firstApplied.close()
	}
	return n1 + n2 + n3, nil
}

// syncTable upserts objs into table and deletes what is not among them.
func syncTable[Obj any](wtxn statedb.WriteTxn, table statedb.RWTable[Obj], objs []Obj,
	equal func(Obj, Obj) bool, setStatus func(Obj, reconciler.Status) Obj) (changed int, err error) {
	w := reconciler.DesiredWriter[Obj]{Table: table, Equal: equal, SetObjectStatus: setStatus}
	keep := make(map[string]bool, len(objs))
	for _, obj := range objs {
		keep[string(table.PrimaryKey(obj))] = true
		written, err := w.Upsert(wtxn, obj)
		if err != nil {
			return changed, err
		}
		if written {
			changed++
		}
	}
	var stale []Obj
	for obj := range table.All(wtxn) {
		if !keep[string(table.PrimaryKey(obj))] {
			stale = append(stale, obj)
		}
	}
	for _, obj := range stale {
		if _, err := w.Delete(wtxn, obj); err != nil {
			return changed, err
		}
		changed++
	}
	return changed, nil
}
