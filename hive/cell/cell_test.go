package cell_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"go.uber.org/dig"
	"go.uber.org/goleak"

	"github.com/steadystate/steadystate/hive/cell"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestModuleIDs(t *testing.T) {
	tests := []struct {
		id    string
		valid bool
	}{
		{"a", true}, {"agent", true}, {"a1", true}, {"route-sync", true}, {"a--b", true},
		{"", false}, {"Agent", false}, {"1a", false}, {"-a", false}, {"a_b", false}, {"a.b", false}, {"a b", false}, {"é", false},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			err := cell.Build(dig.New(), cell.BuildOptions{}, cell.Module(tt.id, "title"))
			if tt.valid && err != nil {
				t.Fatalf("Build = %v, want nil", err)
			}
			if !tt.valid && !errors.Is(err, cell.ErrInvalidModuleID) {
				t.Fatalf("Build = %v, want ErrInvalidModuleID", err)
			}
		})
	}
}

type cfg struct{ Level int }

func (def cfg) Flags(fs *pflag.FlagSet) { fs.Int("level", def.Level, "how much") }

type thing struct{}

func newThing(cfg) *thing       { return &thing{} }
func useThing(*thing)           {}
func wrapThing(t *thing) *thing { return t }

func TestWriteTree(t *testing.T) {
	cells := cell.Module("app", "The app",
		cell.Config(cfg{Level: 3}),
		cell.Group(
			cell.Provide(newThing),
			cell.Decorate(wrapThing, cell.Invoke(useThing)),
		),
		cell.Module("sub", "", cell.ProvidePrivate(newThing)),
	)
	var b strings.Builder
	if err := cell.WriteTree(&b, cells.Info()); err != nil {
		t.Fatal(err)
	}
	want := `module app (The app)
  config cell_test.cfg: --level=3  how much
  provide: cell_test.newThing(cell_test.cfg) → *cell_test.thing
  decorate: cell_test.wrapThing(*cell_test.thing) → *cell_test.thing
    invoke: cell_test.useThing(*cell_test.thing)
  module sub
    provide-private: cell_test.newThing(cell_test.cfg) → *cell_test.thing
`
	if b.String() != want {
		t.Fatalf("tree\n%s\nwant\n%s", b.String(), want)
	}
}

func TestBuildWithFlags(t *testing.T) {
	cells := []cell.Cell{cell.Module("app", "App", cell.Config(cfg{Level: 3}))}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	if err := cell.RegisterFlags(fs, cells...); err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse([]string{"--level=7"}); err != nil {
		t.Fatal(err)
	}
	c := dig.New()
	if err := cell.Build(c, cell.BuildOptions{Flags: fs}, cells...); err != nil {
		t.Fatal(err)
	}
	var got cfg
	if err := c.Invoke(func(v cfg) { got = v }); err != nil {
		t.Fatal(err)
	}
	if got.Level != 7 {
		t.Fatalf("Level = %d, want 7", got.Level)
	}
	// The same cells are reusable: a second container with no flags gets
	// the defaults.
	c2 := dig.New()
	if err := cell.Build(c2, cell.BuildOptions{}, cells...); err != nil {
		t.Fatal(err)
	}
	if err := c2.Invoke(func(v cfg) { got = v }); err != nil || got.Level != 3 {
		t.Fatalf("second build: %v, Level %d", err, got.Level)
	}
}

func TestModuleProviders(t *testing.T) {
	type label string
	var got []string
	c := dig.New()
	err := cell.Build(c, cell.BuildOptions{ModuleProviders: []any{
		func(id cell.FullModuleID) label { return label("<" + id.String() + ">") },
	}},
		cell.Invoke(func(l label) { got = append(got, string(l)) }),
		cell.Module("a", "A", cell.Module("b", "B", cell.Invoke(func(l label) { got = append(got, string(l)) }))),
	)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "<> <a.b>" {
		t.Fatalf("labels %v", got)
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
