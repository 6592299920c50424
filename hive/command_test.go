package hive_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
)

type store struct{}

// appCells is a small application: a config, a provider with a hook and an
// invoke that uses it.
func appCells() []cell.Cell {
	return []cell.Cell{
		cell.Module("server", "HTTP server",
			cell.Config(serverDefaults),
			cell.Module("store", "Storage",
				cell.ProvidePrivate(func(lc cell.Lifecycle) *store {
					lc.Append(cell.Hook{})
					return &store{}
				}),
				cell.Invoke(func(*store) {}),
			),
		),
	}
}

func TestCellsCommand(t *testing.T) {
	cmd := newHive(appCells()...).Command()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"cells", "--port=81"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	want := `hive
  module server (HTTP server)
    config hive_test.serverConfig:
        --port=80  port to listen on
        --name=web  server name
`
	if !strings.HasPrefix(out.String(), want) {
		t.Fatalf("output starts with\n%s\nwant\n%s", out.String(), want)
	}
	for _, s := range []string{
		"    module store (Storage)\n",
		"      provide-private: hive_test.appCells.func1(cell.Lifecycle) → *hive_test.store\n",
		"      invoke: hive_test.appCells.func2(*hive_test.store)\n",
		"      hooks: hive_test.appCells.func1\n",
	} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("output lacks %q:\n%s", s, out.String())
		}
	}
}

func TestCommandRejectsBadFlag(t *testing.T) {
	cmd := newHive(appCells()...).Command()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"--port=eighty"})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "--port") {
		t.Fatalf("Execute = %v, want an error naming --port", err)
	}
}

func TestRunShutdown(t *testing.T) {
	stopErr := errors.New("requested")
	var r recorder
	h := newHive(cell.Invoke(func(s cell.Shutdowner, lc cell.Lifecycle) {
		lc.Append(cell.Hook{
			OnStart: func(context.Context) error {
				r.add("start")
				s.Shutdown(cell.ShutdownWithError(stopErr))
				s.Shutdown() // only the first request counts
				return nil
			},
			OnStop: func(context.Context) error { r.add("stop"); return nil },
		})
	}))
	cmd := h.Command()
	cmd.SetArgs(nil)
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.Execute(); !errors.Is(err, stopErr) {
		t.Fatalf("Execute = %v, want %v", err, stopErr)
	}
	if got := strings.Join(r.events(), ","); got != "start,stop" {
		t.Fatalf("events %s", got)
	}
}

func TestRunStartError(t *testing.T) {
	h := newHive(cell.Invoke(func(lc cell.Lifecycle) {
		lc.Append(cell.Hook{OnStart: func(context.Context) error { return errors.New("nope") }})
	}))
	if err := h.Run(); !errors.Is(err, hive.ErrStartFailed) {
		t.Fatalf("Run = %v, want ErrStartFailed", err)
	}
}
