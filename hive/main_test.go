package hive_test

import (
	"log/slog"
	"strings"
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

// hookNames lists the hooks that PrintCells shows, in tree order.
func hookNames(t *testing.T, h *hive.Hive) []string {
	t.Helper()
	var b strings.Builder
	if err := h.PrintCells(&b); err != nil {
		t.Fatal(err)
	}
	var names []string
	inHooks := -1 // indentation of the "hooks:" line being read, or -1
	for line := range strings.Lines(b.String()) {
		line = strings.TrimRight(line, "\n")
		indent := len(line) - len(strings.TrimLeft(line, " "))
		text := strings.TrimSpace(line)
		switch {
		case inHooks >= 0 && indent > inHooks:
			names = append(names, text)
			continue
		case text == "hooks:":
			inHooks = indent
			continue
		case strings.HasPrefix(text, "hooks: "):
			names = append(names, strings.TrimPrefix(text, "hooks: "))
		}
		inHooks = -1
	}
	return names
}
