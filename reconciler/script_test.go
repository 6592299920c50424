package reconciler_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/tools/txtar"
	"rsc.io/script"
	"rsc.io/script/scripttest"

	"github.com/steadystate/steadystate/statedb"
)

// TestScripts runs the scenarios of testdata/*.txtar with rsc.io/script:
// each file's comment is the script, its files are extracted into the
// script's working directory (for cmp). Every scenario runs twice, with a
// plain target and with a batch target; the conditions [plain] and
// [batch] tell them apart. Run `go test -run TestScripts/NAME -v` to see
// a scenario's log, and put `help` in a script for the commands.
//
// A scenario runs inside a testing/synctest bubble, and every command
// first lets it settle: it waits until every goroutine of the test, the
// reconciler's included, is blocked. The reconciler then cannot move
// until the script changes something or lets time pass, so each expect
// checks the state exactly as it is, without waiting and without luck,
// and "nothing happened" (expect idle) is exact. Time is the bubble's
// fake clock: it passes only with advance, which fires every timer due
// meanwhile in order (retries, OperationTimeout, the interval).
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in testdata: %v", err)
	}
	for _, file := range files {
		archive, err := txtar.ParseFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, mode := range []string{"plain", "batch"} {
			t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar")+"/"+mode, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				inBubble(t, func(t *testing.T) {
					runScript(t, file, archive, dir, mode == "batch")
				})
			})
		}
	}
}

// runScript runs one scenario with a fresh fixture.
func runScript(t *testing.T, file string, archive *txtar.Archive, dir string, batch bool) {
	sc := &scenario{f: newFixture(t, batch)}
	engine := &script.Engine{Cmds: scripttest.DefaultCmds(), Conds: scripttest.DefaultConds()}
	// A real sleep proves nothing; advance lets the fake clock run.
	delete(engine.Cmds, "sleep")
	for name, cmd := range sc.commands() {
		engine.Cmds[name] = cmd
	}
	engine.Conds["batch"] = script.BoolCondition("the target is a reconciler.BatchTarget", batch)
	engine.Conds["plain"] = script.BoolCondition("the target is not a reconciler.BatchTarget", !batch)

	state, err := script.NewState(context.Background(), dir, []string{}) // no environment: the scripts need none
	if err != nil {
		t.Fatal(err)
	}
	if err := state.ExtractFiles(archive); err != nil {
		t.Fatal(err)
	}
	scripttest.Run(t, engine, state, file, bytes.NewReader(archive.Comment))
}

// scenario is the state of one script run.
type scenario struct {
	f        *fixture
	checked  int                    // target operations matched by expect ops so far
	initDone func(statedb.WriteTxn) // set by db uninitialized
	// pruneAfter is Config.PruneAfter, set by start prune-after=held and
	// closed by prunes release.
	pruneAfter chan struct{}
}

// settle waits until every other goroutine of the bubble is blocked.
func settle() { synctest.Wait() }

// settleLimit is how long, in real time, a test in a bubble may take. A
// goroutine that never blocks (a reconciler that keeps updating objects
// because of its own status writes, say) would keep synctest.Wait from
// ever returning; past the limit the test binary panics and prints every
// goroutine, the busy one among them, rather than hang until go test's
// own timeout.
const settleLimit = 2 * time.Minute

// inBubble runs body with synctest.Test, under the settleLimit watchdog.
func inBubble(t *testing.T, body func(t *testing.T)) {
	t.Helper()
	name := t.Name()
	watchdog := time.AfterFunc(settleLimit, func() {
		debug.SetTraceback("all")
		panic(fmt.Sprintf("%s did not settle within %v: a goroutine of the test never blocks (is the reconciler busy in a loop?)", name, settleLimit))
	})
	defer watchdog.Stop()
	synctest.Test(t, body)
}

// command makes a script command that settles before it runs.
func command(summary, args string, detail []string, run func(args []string) error) script.Cmd {
	return script.Command(script.CmdUsage{Summary: summary, Args: args, Detail: detail},
		func(_ *script.State, args ...string) (script.WaitFunc, error) {
			settle()
			return nil, run(args)
		})
}

// subcommands makes a command whose first argument names a subcommand.
func subcommands(summary string, subs map[string]script.Cmd) script.Cmd {
	names := slices.Sorted(maps.Keys(subs))
	var detail []string
	for _, name := range names {
		u := subs[name].Usage()
		detail = append(detail, fmt.Sprintf("%s: %s.", strings.TrimSpace(name+" "+u.Args), u.Summary))
	}
	return script.Command(script.CmdUsage{Summary: summary, Args: strings.Join(names, "|") + " ...", Detail: detail},
		func(s *script.State, args ...string) (script.WaitFunc, error) {
			if len(args) == 0 || subs[args[0]] == nil {
				return nil, script.ErrUsage
			}
			return subs[args[0]].Run(s, args[1:]...)
		})
}

// pairs parses k=v arguments into objects, in order.
func pairs(args []string) ([]*testObj, error) {
	objs := make([]*testObj, 0, len(args))
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil {
			return nil, fmt.Errorf("%q is not key=number", a)
		}
		objs = append(objs, &testObj{ID: k, Value: n})
	}
	return objs, nil
}

// options parses name=value arguments, each name at most once, from the
// names given.
func options(args []string, names ...string) (map[string]string, error) {
	opts := map[string]string{}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || !slices.Contains(names, k) || opts[k] != "" {
			return nil, fmt.Errorf("%q is not one of %s=VALUE, each at most once", a, strings.Join(names, "=, "))
		}
		opts[k] = v
	}
	return opts, nil
}

// durationRange parses "D" or "MIN..MAX".
func durationRange(s string) (lo, hi time.Duration, err error) {
	a, b, isRange := strings.Cut(s, "..")
	if lo, err = time.ParseDuration(a); err != nil {
		return 0, 0, err
	}
	hi = lo
	if isRange {
		hi, err = time.ParseDuration(b)
	}
	return lo, hi, err
}
