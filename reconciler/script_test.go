package reconciler

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/steadystate/steadystate/statedb"
)

// TestScripts runs the scenarios in testdata/*.txtar, each with a plain
// target and with a batch target. A script is a list of commands, one a
// line ('#' starts a comment line); the reconciler starts before the first
// command that is not a config command. The commands:
//
//	backoff MIN MAX | round-size N | timeout D | interval D   config (before start)
//	mode plain                   skip the run with the batch target
//	insert k=v ...               insert new Pending versions in one transaction
//	delete k ...                 delete in one transaction
//	refresh k                    set k's status to Refreshing
//	initializer | initialized    register the table's initializer (before the
//	                             reconciler starts, if first) | mark it done
//	prune                        Reconciler.Prune()
//	fail k N|forever|terminal|panic|hang|off   how the target treats k
//	fail-prune N                 fail the next N prunes
//	real-set k=v | real-delete k change the real system behind the reconciler's back
//	ops [op ...]                 the next target operations are exactly these
//	                             (update(k=v), delete(k), prune); waits for them.
//	                             Without ops: no operation happened since the last check.
//	real [k=v ...]               the real system becomes exactly this
//	status k KIND [text]|absent  k's status becomes KIND, its error containing text
//	wait [failing]               WaitUntilReconciled succeeds [wraps ErrNotAllReconciled]
//	health LEVEL [text]          the latest health report is LEVEL, containing text
//	retries N | errors N         the queued-retries | errors gauge becomes N
//	sleep D                      let time pass (only to show that nothing happens)
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".txtar")
		for _, batch := range []bool{false, true} {
			sub := name
			if batch {
				sub += "/batch"
			}
			t.Run(sub, func(t *testing.T) {
				t.Parallel()
				runScript(t, file, batch)
			})
		}
	}
}

func runScript(t *testing.T, file string, batch bool) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s := &script{t: t, f: newFixture(t, batch), batch: batch}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "-- ") {
			break // txtar file sections: none are used
		}
		t.Logf("%s:%d: %s", file, i+1, line)
		if skip := s.run(strings.Fields(line)); skip {
			t.Skip("plain target only")
		}
	}
}

type script struct {
	t        *testing.T
	f        *fixture
	batch    bool
	consumed int // target operations checked so far
	initDone func(statedb.WriteTxn)
}

var configCommands = map[string]bool{"backoff": true, "round-size": true, "timeout": true, "interval": true, "mode": true}

func (s *script) run(args []string) (skip bool) {
	t, f := s.t, s.f
	cmd, args := args[0], args[1:]
	if cmd == "initializer" && !f.started() {
		// Register before the reconciler starts: a table without
		// initializers is initialized, and with an interval the first full
		// reconciliation would otherwise run before the registration.
		wtxn := f.db.WriteTxn(f.table)
		s.initDone = f.table.RegisterInitializer(wtxn, "script")
		wtxn.Commit()
		f.start()
		return false
	}
	if !configCommands[cmd] && !f.started() {
		f.start()
	}
	switch cmd {
	case "mode":
		return s.batch && args[0] == "plain"
	case "backoff":
		s.needConfig()
		f.cfg.RetryBackoffMin, f.cfg.RetryBackoffMax = s.duration(args[0]), s.duration(args[1])
	case "round-size":
		s.needConfig()
		f.cfg.IncrementalRoundSize = s.int(args[0])
	case "timeout":
		s.needConfig()
		f.cfg.OperationTimeout = s.duration(args[0])
	case "interval":
		s.needConfig()
		f.cfg.FullReconciliationInterval = s.duration(args[0])

	case "insert":
		var objs []*testObj
		for k, v := range s.pairs(args) {
			objs = append(objs, &testObj{ID: k, Value: v})
		}
		f.insert(objs...)
	case "delete":
		f.delete(args...)
	case "refresh":
		wtxn := f.db.WriteTxn(f.table)
		obj, found := f.get(args[0])
		if !found {
			t.Fatalf("refresh: %s not found", args[0])
		}
		f.table.Insert(wtxn, setTestStatus(cloneTestObj(obj), StatusRefreshing()))
		wtxn.Commit()
	case "initializer":
		wtxn := f.db.WriteTxn(f.table)
		s.initDone = f.table.RegisterInitializer(wtxn, "script")
		wtxn.Commit()
	case "initialized":
		wtxn := f.db.WriteTxn(f.table)
		s.initDone(wtxn)
		wtxn.Commit()
	case "prune":
		f.rec.Prune()
	case "fail":
		b := &behavior{}
		switch args[1] {
		case "off":
			b = nil
		case "forever":
			b.forever = true
		case "terminal":
			b.terminal = true
		case "panic":
			b.panics = true
		case "hang":
			b.hang = true
		default:
			b.failN = s.int(args[1])
		}
		f.target.set(args[0], b)
	case "fail-prune":
		f.target.failPrunes(s.int(args[0]))
	case "real-set":
		for k, v := range s.pairs(args) {
			f.target.setReal(k, v, true)
		}
	case "real-delete":
		for _, k := range args {
			f.target.setReal(k, 0, false)
		}

	case "ops":
		s.ops(args)
	case "real":
		want := map[string]int{}
		for k, v := range s.pairs(args) {
			want[k] = v
		}
		var got map[string]int
		waitUntil(t, fmt.Sprintf("real system %v", want), f.target.watch(func(tt *testTarget) bool {
			got = maps.Clone(tt.real)
			return maps.Equal(got, want)
		}))
	case "status":
		s.status(args)
	case "wait":
		_, err := f.waitReconciled()
		switch {
		case len(args) == 0 && err != nil:
			t.Fatalf("WaitUntilReconciled: %v", err)
		case len(args) > 0 && !errors.Is(err, ErrNotAllReconciled):
			t.Fatalf("WaitUntilReconciled returned %v, want ErrNotAllReconciled", err)
		}
	case "health":
		text := strings.Join(args[1:], " ")
		f.health.waitFor(t, "health "+strings.Join(args, " "), func(r healthReport) bool {
			return r.level == args[0] && strings.Contains(r.reason, text)
		})
	case "retries", "errors":
		n := s.int(args[0])
		waitUntil(t, cmd+" gauge "+args[0], f.metrics.watch(func(m *recordingMetrics) bool {
			if cmd == "retries" {
				return m.retries == n
			}
			return m.errors == n
		}))
	case "sleep":
		time.Sleep(s.duration(args[0]))
	default:
		t.Fatalf("unknown command %q", cmd)
	}
	return false
}

func (s *script) needConfig() {
	if s.f.started() {
		s.t.Fatal("config commands must come before the reconciler starts")
	}
}

// ops checks the next target operations.
func (s *script) ops(want []string) {
	t, tt := s.t, s.f.target
	if len(want) == 0 {
		if got := tt.opsList()[s.consumed:]; len(got) > 0 {
			t.Fatalf("unexpected target operations %v", got)
		}
		return
	}
	var got []string
	waitUntil(t, fmt.Sprintf("target operations %v", want), tt.watch(func(tt *testTarget) bool {
		got = tt.ops[s.consumed:]
		return len(got) >= len(want)
	}))
	if got = got[:len(want)]; !slices.Equal(got, want) {
		t.Fatalf("target operations: got %v, want %v", got, want)
	}
	s.consumed += len(want)
}

func (s *script) status(args []string) {
	f := s.f
	if args[1] == "absent" {
		f.waitTable(args[0]+" absent", func(txn statedb.ReadTxn) bool {
			_, _, found := f.table.Get(txn, testIDIndex.Query(args[0]))
			return !found
		})
		return
	}
	kind, err := ParseStatusKind(args[1])
	if err != nil {
		s.t.Fatal(err)
	}
	f.waitStatus(args[0], kind, strings.Join(args[2:], " "))
}

// pairs parses k=v arguments, in order.
func (s *script) pairs(args []string) func(yield func(string, int) bool) {
	return func(yield func(string, int) bool) {
		for _, a := range args {
			k, v, ok := strings.Cut(a, "=")
			if !ok {
				s.t.Fatalf("%q is not k=v", a)
			}
			if !yield(k, s.int(v)) {
				return
			}
		}
	}
}

func (s *script) int(a string) int {
	n, err := strconv.Atoi(a)
	if err != nil {
		s.t.Fatal(err)
	}
	return n
}

func (s *script) duration(a string) time.Duration {
	d, err := time.ParseDuration(a)
	if err != nil {
		s.t.Fatal(err)
	}
	return d
}
