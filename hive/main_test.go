package hive_test

import (
	"log/slog"
	"testing"

	"go.uber.org/goleak"

	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
)

func TestMain(m *testing.M) {
	// signal.Notify starts one receiver goroutine per process, on purpose.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("os/signal.signal_recv"))
}

// quiet is the options tests use: no log output.
var quiet = hive.Options{Logger: slog.New(slog.DiscardHandler)}

// newHive is hive.New with quiet options.
func newHive(cells ...cell.Cell) *hive.Hive { return hive.NewWithOptions(quiet, cells...) }
