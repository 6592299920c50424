package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"

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

	initDone []func(statedb.WriteTxn) // until the first good load
	lastSum  [sha256.Size]byte
	lastErr  string
}

type loaderParams struct {
	cell.In

	Config  AgentConfig
	DB      *statedb.DB
	Sysctls statedb.RWTable[*sysctl.Sysctl]
	Routes  statedb.RWTable[*routes.Route]
	Rules   statedb.RWTable[*iptables.Rule]
	Jobs    job.Group
	Health  cell.Health
	Log     *slog.Logger
}

// registerLoader registers an initializer on each table, so that nothing is
// pruned before the first good load, and adds the loader as a timer job
// that reads the file at start and then every --reload-interval. The
// file's state (loaded, or rejected and why) is the health scope
// "desired-file" of the module.
func registerLoader(p loaderParams) error {
	l := &loader{cfg: p.Config, db: p.DB, sysctls: p.Sysctls, routes: p.Routes, rules: p.Rules, log: p.Log,
		health: p.Health.NewScope("desired-file")}
	wtxn := p.DB.WriteTxn(p.Sysctls, p.Routes, p.Rules)
	l.initDone = []func(statedb.WriteTxn){
		p.Sysctls.RegisterInitializer(wtxn, "desired-file"),
		p.Routes.RegisterInitializer(wtxn, "desired-file"),
		p.Rules.RegisterInitializer(wtxn, "desired-file"),
	}
	wtxn.Commit()
	first := job.NewTrigger()
	first.Trigger() // the first load as soon as the job starts
	return p.Jobs.Add(job.Timer("load-desired", l.loadIfChanged, l.cfg.ReloadInterval, job.WithTrigger(first)))
}

// loadIfChanged reads the file and, if it changed, applies it. A file that
// cannot be read, parsed or validated is reported (in the log once, and in
// the health scope as long as it stays) and changes nothing. The job
// itself never fails.
func (l *loader) loadIfChanged(context.Context) error {
	health := l.health
	data, err := os.ReadFile(l.cfg.Desired)
	if err != nil {
		l.reject(health, fmt.Errorf("reading desired state: %w", err))
		return nil
	}
	sum := sha256.Sum256(data)
	if sum == l.lastSum && l.initDone == nil {
		return nil
	}
	f, err := decodeDesired(l.cfg.Desired, data)
	if err == nil {
		err = l.validate(f)
	}
	if err != nil {
		l.reject(health, err)
		l.lastSum = sum // report once per version of the file
		return nil
	}
	changed, err := l.apply(f)
	if err != nil {
		l.reject(health, fmt.Errorf("%s: applying: %w", l.cfg.Desired, err))
		return nil
	}
	l.lastSum, l.lastErr = sum, ""
	msg := fmt.Sprintf("loaded %s: %d sysctls, %d routes, %d rules", l.cfg.Desired, len(f.Sysctls), len(f.Routes), len(f.Rules))
	health.OK(msg)
	l.log.Info("Desired state loaded", "file", l.cfg.Desired, "sysctls", len(f.Sysctls), "routes", len(f.Routes), "rules", len(f.Rules), "changed", changed)
	return nil
}

func (l *loader) reject(health cell.Health, err error) {
	health.Degraded(fmt.Sprintf("desired state in %s rejected; keeping the current desired state", l.cfg.Desired), err)
	if err.Error() != l.lastErr {
		l.log.Error("Desired state rejected; keeping the current desired state", "file", l.cfg.Desired, "error", err)
		l.lastErr = err.Error()
	}
}

func (l *loader) validate(f *desiredFile) error {
	var errs []error
	errs = append(errs, validateAll("sysctls", f.Sysctls, l.sysctls.PrimaryKey)...)
	errs = append(errs, validateAll("routes", f.Routes, l.routes.PrimaryKey)...)
	errs = append(errs, validateAll("rules", f.Rules, l.rules.PrimaryKey)...)
	if len(errs) > 0 {
		return fmt.Errorf("%s: %w", l.cfg.Desired, errors.Join(errs...))
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
	for _, done := range l.initDone {
		done(wtxn)
	}
	l.initDone = nil
	wtxn.Commit()
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
