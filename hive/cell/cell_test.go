package cell_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"go.uber.org/goleak"

	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/hivetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type (
	addr     string
	port     int
	endpoint struct{ addr, note string }
)

// endpointParams bundles parameters with cell.In; note is optional and
// nothing provides it.
type endpointParams struct {
	cell.In

	Addr addr
	Port port
	Note *string `optional:"true"`
}

// endpointResults bundles results with cell.Out.
type endpointResults struct {
	cell.Out

	Addr addr
	Port port
}

func TestInAndOut(t *testing.T) {
	var got endpoint
	var gotPort port
	hivetest.Start(t,
		cell.Provide(func() endpointResults { return endpointResults{Addr: "10.0.0.1", Port: 80} }),
		cell.Provide(func(p endpointParams) endpoint {
			e := endpoint{addr: string(p.Addr)}
			if p.Note == nil {
				e.note = "no note"
			}
			return e
		}),
		cell.Invoke(func(e endpoint, p port) { got, gotPort = e, p }),
	)
	if got != (endpoint{addr: "10.0.0.1", note: "no note"}) || gotPort != 80 {
		t.Fatalf("endpoint %+v, port %d", got, gotPort)
	}
}

func TestHookAndShutdownRequest(t *testing.T) {
	var h cell.Hook // both functions nil: a no-op
	if h.Start(context.Background()) != nil || h.Stop(context.Background()) != nil {
		t.Fatal("zero Hook returned an error")
	}
	boom := errors.New("boom")
	if r := cell.NewShutdownRequest(cell.ShutdownWithError(boom)); r.Err != boom {
		t.Fatalf("request %+v", r)
	}
	if r := cell.NewShutdownRequest(); r.Err != nil {
		t.Fatalf("request %+v", r)
	}
}

func TestFullModuleIDString(t *testing.T) {
	if got := (cell.FullModuleID{"agent", "routes"}).String(); got != "agent.routes" {
		t.Fatalf("String = %q", got)
	}
	if got := (cell.FullModuleID{}).String(); got != "" {
		t.Fatalf("String of the root = %q", got)
	}
}

// greeting is a member of the value group "greetings".
type greeting struct {
	cell.Out

	Text string `group:"greetings"`
}

type greetings struct {
	cell.In

	All []string `group:"greetings"`
}

func TestValueGroups(t *testing.T) {
	var got []string
	hivetest.Start(t,
		cell.Module("en", "English", cell.Provide(func() greeting { return greeting{Text: "hello"} })),
		cell.Module("fr", "French", cell.Provide(func() greeting { return greeting{Text: "bonjour"} })),
		cell.Invoke(func(g greetings) { got = g.All }),
	)
	slices.Sort(got)
	if !slices.Equal(got, []string{"bonjour", "hello"}) {
		t.Fatalf("group %v, want both modules' greetings", got)
	}
}
