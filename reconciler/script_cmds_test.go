package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"rsc.io/script"

	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilertest"
)

// commands returns the script commands of the reconciler scenarios. Every
// one of them first lets the scenario settle (see TestScripts).
func (sc *scenario) commands() map[string]script.Cmd {
	return map[string]script.Cmd{
		"start": command("create the reconciler from the test config and run it until the test ends",
			"[backoff=D|MIN..MAX] [round=N] [timeout=D] [interval=D] [refresh=D] [rate=N] [workers=N] [min-round=D] [planner=on] [drift=on] [prune-after=held]",
			[]string{"The options set RetryBackoffMin and Max (default 1ms..10ms), IncrementalRoundSize, OperationTimeout,",
				"FullReconciliationInterval (prune), RefreshInterval, RefreshRate, Workers and MinRoundInterval;",
				"planner=on gives the target reconciler.Planner (it plans by comparing values with the real system;",
				"a batch target also plans in batches, reconciler.BatchPlanner); drift=on makes the target report",
				"drift (reconciler.DriftTarget): what target drift and drift-all say; prune-after=held sets",
				"PruneAfter to a channel that prunes release closes."},
			sc.start),
		"stop": command("stop the reconciler and wait for Run to return", "", nil, func(args []string) error {
			if sc.f.rec == nil || len(args) > 0 {
				return errors.New("usage: stop, after start")
			}
			sc.f.rec.Stop()
			return nil
		}),
		"prune": command("ask for a full reconciliation (Reconciler.Prune)", "", nil, func(args []string) error {
			if sc.f.rec == nil || len(args) > 0 {
				return errors.New("usage: prune, after start")
			}
			sc.f.rec.Prune()
			return nil
		}),
		"prunes": command("release the prunes held by start prune-after=held (close Config.PruneAfter)", "release", nil, func(args []string) error {
			if len(args) != 1 || args[0] != "release" || sc.pruneAfter == nil {
				return errors.New("usage: prunes release, after start prune-after=held")
			}
			close(sc.pruneAfter)
			sc.pruneAfter = nil
			return nil
		}),
		"advance": command("let time pass on the fake clock, firing every timer due meanwhile", "DURATION", nil, advance),
		"db":      subcommands("change the desired state, as a writer would", sc.dbCommands()),
		"target":  subcommands("make the target misbehave, or change the real system behind the reconciler's back", sc.targetCommands()),
		"expect":  subcommands("check the state, exactly as it is once everything has settled", sc.expectCommands()),
	}
}

func (sc *scenario) start(args []string) error {
	f := sc.f
	if f.rec != nil {
		return errors.New("the reconciler is already started")
	}
	opts, err := options(args, "backoff", "round", "timeout", "interval", "refresh", "rate", "workers", "min-round", "planner", "drift", "prune-after")
	if err != nil {
		return err
	}
	for name, v := range opts {
		var err error
		switch name {
		case "backoff":
			f.cfg.RetryBackoffMin, f.cfg.RetryBackoffMax, err = durationRange(v)
		case "round":
			f.cfg.IncrementalRoundSize, err = strconv.Atoi(v)
		case "timeout":
			f.cfg.OperationTimeout, err = time.ParseDuration(v)
		case "interval":
			f.cfg.FullReconciliationInterval, err = time.ParseDuration(v)
		case "refresh":
			f.cfg.RefreshInterval, err = time.ParseDuration(v)
		case "rate":
			f.cfg.RefreshRate, err = strconv.ParseFloat(v, 64)
		case "workers":
			f.cfg.Workers, err = strconv.Atoi(v)
		case "min-round":
			f.cfg.MinRoundInterval, err = time.ParseDuration(v)
		case "planner":
			f.withPlanner()
		case "drift":
			f.target.ReportsDrift()
		case "prune-after":
			if v != "held" {
				err = errors.New("the only value is held")
				break
			}
			sc.pruneAfter = make(chan struct{})
			f.cfg.PruneAfter = sc.pruneAfter
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	f.start()
	return nil
}

// advance sleeps on the bubble's fake clock, which runs every goroutine
// woken by a timer due meanwhile, in time order, then settles.
func advance(args []string) error {
	if len(args) != 1 {
		return script.ErrUsage
	}
	d, err := time.ParseDuration(args[0])
	if err != nil {
		return err
	}
	time.Sleep(d)
	settle()
	return nil
}

func (sc *scenario) dbCommands() map[string]script.Cmd {
	f := sc.f
	return map[string]script.Cmd{
		"insert": command("insert new Pending versions of the objects in one transaction", "KEY=VALUE...", nil, func(args []string) error {
			objs, err := pairs(args)
			if err != nil || len(objs) == 0 {
				return errors.Join(script.ErrUsage, err)
			}
			f.insert(objs...)
			return nil
		}),
		"delete": command("delete the objects in one transaction", "KEY...", nil, func(args []string) error {
			if len(args) == 0 {
				return script.ErrUsage
			}
			f.delete(args...)
			return nil
		}),
		"refresh": command("set the objects' status to Refreshing: applied again unchanged", "KEY...", nil, func(args []string) error {
			wtxn := f.db.WriteTxn(f.table)
			defer wtxn.Abort()
			for _, k := range args {
				obj, found := f.get(k)
				if !found {
					return fmt.Errorf("%s is not in the table", k)
				}
				f.table.Insert(wtxn, setStatus(cloneObj(obj), reconciler.StatusRefreshing()))
			}
			wtxn.Commit()
			return nil
		}),
		"uninitialized": command("register an initializer: the table is not initialized until db initialized", "", nil, func([]string) error {
			if sc.initDone != nil {
				return errors.New("an initializer is already registered")
			}
			wtxn := f.db.WriteTxn(f.table)
			sc.initDone = f.table.RegisterInitializer(wtxn, "script")
			wtxn.Commit()
			return nil
		}),
		"initialized": command("mark the initializer done: the table is initialized", "", nil, func([]string) error {
			if sc.initDone == nil {
				return errors.New("no initializer registered (db uninitialized)")
			}
			wtxn := f.db.WriteTxn(f.table)
			sc.initDone(wtxn)
			wtxn.Commit()
			return nil
		}),
		"show": script.Command(script.CmdUsage{Summary: "print the table, one 'KEY VALUE STATUS' line per object, for cmp"},
			func(*script.State, ...string) (script.WaitFunc, error) {
				settle()
				var b strings.Builder
				for obj := range f.table.All(f.db.ReadTxn()) {
					fmt.Fprintf(&b, "%s %d %s\n", obj.ID, obj.Value, obj.Status)
				}
				return func(*script.State) (string, string, error) { return b.String(), "", nil }, nil
			}),
	}
}

func (sc *scenario) targetCommands() map[string]script.Cmd {
	target := sc.f.target
	inject := func(f reconcilertest.Fault) func(args []string) error {
		return func(keys []string) error {
			if len(keys) == 0 {
				return script.ErrUsage
			}
			for _, k := range keys {
				target.Inject(k, f)
			}
			return nil
		}
	}
	return map[string]script.Cmd{
		"fail": command("make the operations on the keys fail, N times or until healed, with a plain or terminal error",
			"KEY... [times=N] [terminal]", nil, func(args []string) error {
				var f reconcilertest.Fault
				var keys []string
				for _, a := range args {
					switch n, isTimes := strings.CutPrefix(a, "times="); {
					case isTimes:
						var err error
						if f.Times, err = strconv.Atoi(n); err != nil {
							return err
						}
					case a == "terminal":
						f.Terminal = true
					default:
						keys = append(keys, a)
					}
				}
				return inject(f)(keys)
			}),
		"panic": command("make the operations on the keys panic, until healed", "KEY...", nil, inject(reconcilertest.Fault{Panic: true})),
		"hang": command("make the operations on the keys block until healed or their context ends", "KEY...", nil,
			inject(reconcilertest.Fault{Block: true})),
		"ignore-ctx": command("make the operations on the keys block until healed, ignoring their context", "KEY...", nil,
			inject(reconcilertest.Fault{Block: true, IgnoreContext: true})),
		"heal": command("clear the keys' faults; operations they block go on", "KEY...", nil, func(keys []string) error {
			if len(keys) == 0 {
				return script.ErrUsage
			}
			for _, k := range keys {
				target.Clear(k)
			}
			return nil
		}),
		"fail-prune": command("make Prune fail, N times or until heal-prune", "[times=N]", nil, func(args []string) error {
			opts, err := options(args, "times")
			if err != nil {
				return err
			}
			var f reconcilertest.Fault
			if n, ok := opts["times"]; ok {
				if f.Times, err = strconv.Atoi(n); err != nil {
					return err
				}
			}
			target.InjectPrune(f)
			return nil
		}),
		"heal-prune": command("clear Prune's fault", "", nil, func([]string) error { target.ClearPrune(); return nil }),
		"hang-prune": command("make Prune block until heal-prune or its context ends (ignore-ctx: until heal-prune only)", "[ignore-ctx]", nil, func(args []string) error {
			f := reconcilertest.Fault{Block: true}
			switch {
			case len(args) == 1 && args[0] == "ignore-ctx":
				f.IgnoreContext = true
			case len(args) > 0:
				return script.ErrUsage
			}
			target.InjectPrune(f)
			return nil
		}),
		"set": command("change the real system behind the reconciler's back", "KEY=VALUE...", nil, func(args []string) error {
			objs, err := pairs(args)
			if err != nil || len(objs) == 0 {
				return errors.Join(script.ErrUsage, err)
			}
			for _, o := range objs {
				target.SetState(o.ID, o)
			}
			return nil
		}),
		"drift": command("report that the keys' real state may have changed (as the real system's notifications would)", "KEY...", nil, func(keys []string) error {
			if len(keys) == 0 {
				return script.ErrUsage
			}
			for _, k := range keys {
				target.ReportDrift(index.String(k))
			}
			return nil
		}),
		"drift-prefix": command("report that the real state of the objects whose keys start with PREFIX may have changed", "PREFIX...", nil, func(prefixes []string) error {
			if len(prefixes) == 0 {
				return script.ErrUsage
			}
			for _, p := range prefixes {
				target.ReportDriftPrefix(index.String(p))
			}
			return nil
		}),
		"drift-all": command("report that any object's real state may have changed (notifications were lost)", "", nil, func([]string) error {
			target.ReportAllDrift()
			return nil
		}),
		"fail-watch": command("make the drift watch fail, and fail again when restarted, until heal-watch", "", nil, func([]string) error {
			target.FailDriftWatch(errors.New("injected watch failure"))
			return nil
		}),
		"heal-watch": command("let the drift watch work again when it is next restarted", "", nil, func([]string) error {
			target.HealDriftWatch()
			return nil
		}),
		"remove": command("remove keys from the real system behind the reconciler's back", "KEY...", nil, func(keys []string) error {
			if len(keys) == 0 {
				return script.ErrUsage
			}
			for _, k := range keys {
				target.RemoveState(k)
			}
			return nil
		}),
	}
}

// opString writes an operation as scripts do: update(k=v), delete(k),
// prune.
func opString(op reconcilertest.Op[*testObj]) string {
	if op.Kind == reconciler.OpUpdate {
		return fmt.Sprintf("update(%s=%d)", op.Key, op.Object.Value)
	}
	return op.String()
}

func (sc *scenario) expectCommands() map[string]script.Cmd {
	f := sc.f
	return map[string]script.Cmd{
		"ops": command("the target operations since the last expect ops are exactly these", "update(KEY=VALUE)|delete(KEY)|prune...", nil, func(want []string) error {
			if len(want) == 0 {
				return errors.New("usage: expect ops OP...; for none, expect idle")
			}
			return sc.expectOps(want)
		}),
		"idle": command("no target operation since the last expect ops", "", nil, func([]string) error { return sc.expectOps(nil) }),
		"state": command("the real system holds exactly these", "[KEY=VALUE...]", nil, func(args []string) error {
			want, err := pairs(args)
			if err != nil {
				return err
			}
			wantS := map[string]int{}
			for _, o := range want {
				wantS[o.ID] = o.Value
			}
			got := map[string]int{}
			for k, o := range f.target.State() {
				got[k] = o.Value
			}
			if !maps.Equal(got, wantS) {
				return fmt.Errorf("the real system holds %v, want %v", got, wantS)
			}
			return nil
		}),
		"status": command("the object's status is KIND, its error containing TEXT; or the object is absent", "KEY KIND [TEXT...] | KEY absent", nil, func(args []string) error {
			if len(args) < 2 {
				return script.ErrUsage
			}
			obj, found := f.get(args[0])
			is := "absent"
			if found {
				is = fmt.Sprintf("%v %s", obj, obj.Status)
			}
			if args[1] == "absent" {
				if found {
					return fmt.Errorf("%s is in the table: %s", args[0], is)
				}
				return nil
			}
			kind, err := reconciler.ParseStatusKind(args[1])
			if err != nil {
				return err
			}
			text := strings.Join(args[2:], " ")
			if !found || obj.Status.Kind != kind || !strings.Contains(obj.Status.Error, text) {
				return fmt.Errorf("%s is %s, want %s %q", args[0], is, kind, text)
			}
			return nil
		}),
		"reconciled": command("WaitUntilReconciled at the table's revision returns now, with no failure or N failing", "[N failing]", nil, func(args []string) error {
			failing := 0
			if len(args) == 2 && args[1] == "failing" {
				failing, _ = strconv.Atoi(args[0])
			}
			if len(args) > 0 && failing <= 0 {
				return script.ErrUsage
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // settled: the reconciler is where it will stay
			want := f.table.Revision(f.db.ReadTxn())
			reached, err := f.rec.WaitUntilReconciled(ctx, want)
			switch {
			case reached < want:
				return fmt.Errorf("the reconciler is at revision %d, the table at %d", reached, want)
			case failing == 0 && err != nil:
				return err
			case failing > 0 && (!errors.Is(err, reconciler.ErrNotAllReconciled) || !strings.Contains(err.Error(), fmt.Sprintf(" %d objects failing", failing))):
				return fmt.Errorf("WaitUntilReconciled returned %v, want ErrNotAllReconciled with %d failing", err, failing)
			}
			return nil
		}),
		"health": command("the latest health report is LEVEL, its reason containing TEXT", "OK|Degraded|Stopped [TEXT...]", nil, func(args []string) error {
			if len(args) == 0 {
				return script.ErrUsage
			}
			last, ok := f.health.Last()
			if !ok || last.Level != reconcilertest.Level(args[0]) || !strings.Contains(last.Reason, strings.Join(args[1:], " ")) {
				return fmt.Errorf("latest health report %v, want %s containing %q", last, args[0], strings.Join(args[1:], " "))
			}
			return nil
		}),
		"retries": command("the queued-retries gauge is N", "N", nil, func(args []string) error {
			_, retries := f.metrics.read()
			return expectGauge("queued retries", retries, args)
		}),
		"metrics": command("the counters and gauges named are these",
			"[drift=N] [pruned=N] [skipped=N] [stuck=N] [refresh-queue=N] [workers-max=N] [reports=N] [checked=N] [checks=N] [plans=N]",
			[]string{"reports, checked and checks are the drift reports, the objects checked and the rounds that checked any",
				"(Metrics.DriftChecked); plans is how many times the target's planner was called (a batch plan once)."},
			func(args []string) error {
				opts, err := options(args, "drift", "pruned", "skipped", "stuck", "refresh-queue", "workers-max", "reports", "checked", "checks", "plans")
				if err != nil || len(opts) == 0 {
					return errors.Join(script.ErrUsage, err)
				}
				m := f.metrics
				m.mu.Lock()
				got := map[string]int{"drift": m.drift, "pruned": m.pruned, "skipped": m.skipped, "stuck": m.stuck,
					"refresh-queue": m.refresh, "workers-max": m.busyMax, "reports": m.reports, "checked": m.checked,
					"checks": m.checks, "plans": f.target.Plans()}
				m.mu.Unlock()
				for name, v := range opts {
					if err := expectGauge(name, got[name], []string{v}); err != nil {
						return err
					}
				}
				return nil
			}),
		"blocked": command("exactly N target operations are blocked by a fault right now", "N", nil, func(args []string) error {
			return expectGauge("blocked operations", f.target.Blocked(), args)
		}),
		"errors": command("the errors gauge (objects failing) is N", "N", nil, func(args []string) error {
			errs, _ := f.metrics.read()
			return expectGauge("errors", errs, args)
		}),
	}
}

// expectOps checks the operations since the last check, and marks them
// checked.
func (sc *scenario) expectOps(want []string) error {
	ops := sc.f.target.Ops()[sc.checked:]
	got := make([]string, len(ops))
	for i, op := range ops {
		got[i] = opString(op)
	}
	sc.checked += len(ops)
	if !slices.Equal(got, want) {
		return fmt.Errorf("target operations %v, want %v", got, want)
	}
	return nil
}

func expectGauge(name string, got int, args []string) error {
	if len(args) != 1 {
		return script.ErrUsage
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("the %s gauge is %d, want %d", name, got, want)
	}
	return nil
}
