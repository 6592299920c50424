// Command hello is the smallest complete steadystate program, in one file
// and without root: a hive with a table of desired greetings, a writer that
// changes them, and a reconciler whose target keeps one file per greeting
// in a directory. It runs for --duration (0: until Ctrl-C) and exits 0.
//
// From the repository's examples directory (a module of its own):
//
//	cd examples
//	go run ./hello                          # files in a temporary directory
//	go run ./hello --dir /tmp/hi --duration 0
//
// Copy it to start a program of your own; examples/sysctl is the template
// for a real target.
package main

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/job"
	"github.com/steadystate/steadystate/index"
	"github.com/steadystate/steadystate/reconciler"
	"github.com/steadystate/steadystate/reconciler/reconcilercell"
	"github.com/steadystate/steadystate/statedb"
	"github.com/steadystate/steadystate/statedb/statedbcell"
)

// Greeting is one desired file: Name.txt holding Text. Objects are
// immutable once inserted: clone, change the clone, insert it.
type Greeting struct {
	Name   string
	Text   string
	Status reconciler.Status
}

func (g *Greeting) Clone() *Greeting                        { c := *g; return &c }
func (g *Greeting) GetStatus() reconciler.Status            { return g.Status }
func (g *Greeting) SetStatus(s reconciler.Status) *Greeting { g.Status = s; return g }
func (g *Greeting) String() string                          { return g.Name + ": " + g.Text }

// byName is the table's primary index.
var byName = statedb.Index[*Greeting, string]{
	Name:       "name",
	FromObject: func(g *Greeting) index.KeySet { return index.NewKeySet(index.String(g.Name)) },
	FromKey:    index.String,
	Unique:     true,
}

// fileTarget is the "real system": a directory with one file per greeting.
// It reads before it writes, and Prune removes only *.txt files (the ones it
// owns).
type fileTarget struct {
	dir string
	log *slog.Logger
}

func (t fileTarget) path(name string) string { return filepath.Join(t.dir, name+".txt") }

func (t fileTarget) Update(_ context.Context, _ statedb.ReadTxn, g *Greeting) error {
	if cur, err := os.ReadFile(t.path(g.Name)); err == nil && string(cur) == g.Text+"\n" {
		return nil // already as desired
	}
	t.log.Info("Writing", "file", t.path(g.Name), "text", g.Text)
	return os.WriteFile(t.path(g.Name), []byte(g.Text+"\n"), 0o644)
}

func (t fileTarget) Delete(_ context.Context, _ statedb.ReadTxn, g *Greeting) error {
	err := os.Remove(t.path(g.Name))
	if err == nil {
		t.log.Info("Removed", "file", t.path(g.Name))
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

func (t fileTarget) Prune(_ context.Context, _ statedb.ReadTxn, desired iter.Seq2[*Greeting, statedb.Revision]) error {
	keep := map[string]bool{}
	for g := range desired {
		keep[g.Name+".txt"] = true
	}
	files, err := filepath.Glob(filepath.Join(t.dir, "*.txt"))
	for _, f := range files {
		if !keep[filepath.Base(f)] {
			t.log.Info("Pruning", "file", f)
			err = errors.Join(err, os.Remove(f))
		}
	}
	return err
}

// Config is the program's configuration, from flags (or HELLO_DIR and
// HELLO_DURATION).
type Config struct {
	Dir      string
	Duration time.Duration
}

func (def Config) Flags(fs *pflag.FlagSet) {
	fs.String("dir", def.Dir, "directory of the greeting files (default: a new temporary directory, removed at exit)")
	fs.Duration("duration", def.Duration, "how long to run (0: until Ctrl-C)")
}

// cells assemble the program.
var cells = []cell.Cell{
	statedbcell.Cell,
	reconcilercell.MetricsCell,
	cell.Module("hello", "Greetings kept as files",
		cell.Config(Config{Duration: 3 * time.Second}),
		statedbcell.TableCell("greetings", byName),
		cell.Invoke(registerReconciler, registerWriter),
	),
}

func registerReconciler(p reconcilercell.Params, cfg Config, table statedb.RWTable[*Greeting], lc cell.Lifecycle, log *slog.Logger) error {
	target := fileTarget{dir: cfg.Dir, log: log}
	lc.Append(cell.Hook{
		OnStart: func(context.Context) error {
			if target.dir != "" {
				return os.MkdirAll(target.dir, 0o755)
			}
			dir, err := os.MkdirTemp("", "hello-")
			target.dir = dir
			return err
		},
		OnStop: func(context.Context) error {
			files, _ := filepath.Glob(filepath.Join(target.dir, "*.txt"))
			for _, f := range files {
				b, _ := os.ReadFile(f)
				log.Info("File at exit", "file", f, "text", strings.TrimSpace(string(b)))
			}
			if cfg.Dir == "" {
				return os.RemoveAll(target.dir)
			}
			return nil
		},
	})
	_, err := reconcilercell.Register(p, reconciler.Config[*Greeting]{
		Name:                       "greetings",
		Table:                      table,
		Target:                     &target, // the start hook sets dir
		GetObjectStatus:            (*Greeting).GetStatus,
		SetObjectStatus:            (*Greeting).SetStatus,
		CloneObject:                (*Greeting).Clone,
		FullReconciliationInterval: time.Second,
	})
	return err
}

// registerWriter adds the writer: it inserts greetings, changes one,
// removes one, then stops the program after the duration.
func registerWriter(jobs job.Group, db *statedb.DB, table statedb.RWTable[*Greeting], cfg Config, sd cell.Shutdowner, log *slog.Logger) error {
	wtxn := db.WriteTxn(table)
	done := table.RegisterInitializer(wtxn, "writer") // no pruning before the first write
	wtxn.Commit()
	return jobs.Add(job.OneShot("writer", func(ctx context.Context, _ cell.Health) error {
		write := func(insert []*Greeting, remove ...string) {
			wtxn := db.WriteTxn(table)
			defer wtxn.Abort()
			for _, g := range insert {
				table.Insert(wtxn, g.SetStatus(reconciler.StatusPending()))
			}
			for _, name := range remove {
				table.Delete(wtxn, &Greeting{Name: name})
			}
			if done != nil {
				done(wtxn) // the table is initialized: pruning may start
				done = nil
			}
			wtxn.Commit()
		}
		steps := []func(){
			func() {
				log.Info("Writing two greetings")
				write([]*Greeting{{Name: "world", Text: "Hello, world"}, {Name: "gopher", Text: "Hello, gopher"}})
			},
			func() { log.Info("Changing one"); write([]*Greeting{{Name: "world", Text: "Hello again, world"}}) },
			func() { log.Info("Removing one"); write(nil, "gopher") },
		}
		for _, step := range steps {
			step()
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(300 * time.Millisecond):
			}
		}
		if cfg.Duration > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(cfg.Duration):
				sd.Shutdown()
			}
		}
		return nil
	}))
}

func main() {
	os.Exit(run(os.Args[1:]))
}

// run runs the program with args and returns its exit code.
func run(args []string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	h := hive.NewWithOptions(hive.Options{Logger: log, EnvPrefix: "HELLO"}, cells...)
	cmd := h.Command()
	cmd.Use = "hello"
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "hello:", err)
		return 1
	}
	return 0
}
