package hive_test

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
)

// Clock is a component with a lifecycle.
type Clock struct{}

func newClock(lc cell.Lifecycle) *Clock {
	lc.Append(cell.Hook{
		OnStart: func(context.Context) error { fmt.Println("clock started"); return nil },
		OnStop:  func(context.Context) error { fmt.Println("clock stopped"); return nil },
	})
	return &Clock{}
}

// A minimal hive: one constructor, one invoke that makes it run.
func ExampleNew() {
	h := hive.New(
		cell.Module("clock", "Keeps time",
			cell.Provide(newClock),
			cell.Invoke(func(*Clock) {}),
		),
	)
	if err := h.Start(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	if err := h.Stop(context.Background()); err != nil {
		fmt.Println(err)
	}
	// Output:
	// clock started
	// clock stopped
}

// GreeterConfig is a module's configuration: each field has a flag.
type GreeterConfig struct {
	Name  string
	Times int
}

// Flags declares the flags, with the defaults taken from def.
func (def GreeterConfig) Flags(fs *pflag.FlagSet) {
	fs.String("name", def.Name, "whom to greet")
	fs.Int("times", def.Times, "how many times")
}

// Greeter is a module with a config. The program runs it through its cobra
// command, so --name and --times (or GREETER_NAME, GREETER_TIMES) set it.
var Greeter = cell.Module("greeter", "Greets someone",
	cell.Config(GreeterConfig{Name: "world", Times: 1}),
	cell.Invoke(func(cfg GreeterConfig, lc cell.Lifecycle, s cell.Shutdowner) {
		lc.Append(cell.Hook{OnStart: func(context.Context) error {
			for range cfg.Times {
				fmt.Printf("hello, %s\n", cfg.Name)
			}
			s.Shutdown() // a real program would run until SIGTERM
			return nil
		}})
	}),
)

// A module with config, run through the hive's command line.
func ExampleHive_Command() {
	h := hive.NewWithOptions(hive.Options{EnvPrefix: "GREETER"}, Greeter)
	cmd := h.Command()
	cmd.SetArgs([]string{"--name=gopher", "--times=2"})
	if err := cmd.Execute(); err != nil {
		fmt.Println(err)
	}
	// Output:
	// hello, gopher
	// hello, gopher
}
