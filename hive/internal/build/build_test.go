package build_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"go.uber.org/dig"

	"github.com/steadystate/steadystate/hive/cell"
	"github.com/steadystate/steadystate/hive/internal/build"
	"github.com/steadystate/steadystate/internal/names"
)

// root is the node of cells as one group, as the hive builds them.
func root(cells ...cell.Cell) *build.Node { return build.NodeOf(cell.Group(cells...)) }

func TestModuleIDsFollowTheNameRule(t *testing.T) {
	tests := []struct {
		id    string
		valid bool
	}{
		{"a", true}, {"agent", true}, {"a1", true}, {"route-sync", true}, {"a--b", true}, {"a_b", true},
		{strings.Repeat("m", 64), true},
		{"", false}, {"Agent", false}, {"1a", false}, {"-a", false}, {"_a", false}, {"a.b", false}, {"a b", false},
		{"é", false}, {strings.Repeat("m", 65), false},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			if tt.valid != names.Valid(tt.id) {
				t.Fatalf("names.Valid(%q) = %v; this table must follow the one name rule", tt.id, !tt.valid)
			}
			err := build.Build(dig.New(), build.Options{}, root(cell.Module("outer", "", cell.Module(tt.id, "title"))))
			if tt.valid && err != nil {
				t.Fatalf("Build = %v, want nil", err)
			}
			if tt.valid {
				return
			}
			if !errors.Is(err, cell.ErrInvalidModuleID) {
				t.Fatalf("Build = %v, want ErrInvalidModuleID", err)
			}
			for _, s := range []string{"module outer: ", `"` + tt.id + `"`, names.Pattern} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestNilCell(t *testing.T) {
	err := build.Build(dig.New(), build.Options{}, root(cell.Module("a", "A", cell.Group(nil))))
	if !errors.Is(err, cell.ErrNilCell) || !strings.Contains(err.Error(), "module a: ") {
		t.Fatalf("Build = %v, want ErrNilCell naming module a", err)
	}
	if build.NodeOf(nil) != nil || build.NodeOf(42) != nil {
		t.Fatal("NodeOf of a non-cell is not nil")
	}
}

type cfg struct{ Level int }

func (def cfg) Flags(fs *pflag.FlagSet) { fs.Int("level", def.Level, "how much") }

type thing struct{}

func newThing(cfg) *thing       { return &thing{} }
func useThing(*thing)           {}
func wrapThing(t *thing) *thing { return t }

func TestWriteTree(t *testing.T) {
	cells := root(cell.Module("app", "The app",
		cell.Config(cfg{Level: 3}),
		cell.Group(
			cell.Provide(newThing),
			cell.Decorate(wrapThing, cell.Invoke(useThing, useThing)),
		),
		cell.Module("sub", "", cell.ProvidePrivate(newThing)),
	))
	var b strings.Builder
	hooks := map[string][]string{"": {"root hook"}, "app.sub": {"one", "two"}}
	if err := build.WriteTree(&b, cells, hooks); err != nil {
		t.Fatal(err)
	}
	want := `hive
  module app (The app)
    config build_test.cfg: --level=3  how much
    provide: build_test.newThing(build_test.cfg) → *build_test.thing
    decorate: build_test.wrapThing(*build_test.thing) → *build_test.thing
      invoke:
          build_test.useThing(*build_test.thing)
          build_test.useThing(*build_test.thing)
    module sub
      provide-private: build_test.newThing(build_test.cfg) → *build_test.thing
      hooks:
          one
          two
  hooks: root hook
`
	if b.String() != want {
		t.Fatalf("tree\n%s\nwant\n%s", b.String(), want)
	}
}

func TestBuildWithFlags(t *testing.T) {
	cells := root(cell.Module("app", "App", cell.Config(cfg{Level: 3})))
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	if err := build.RegisterFlags(fs, cells); err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse([]string{"--level=7"}); err != nil {
		t.Fatal(err)
	}
	c := dig.New()
	if err := build.Build(c, build.Options{Flags: fs}, cells); err != nil {
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
	if err := build.Build(c2, build.Options{}, cells); err != nil {
		t.Fatal(err)
	}
	if err := c2.Invoke(func(v cfg) { got = v }); err != nil || got.Level != 3 {
		t.Fatalf("second build: %v, Level %d", err, got.Level)
	}
	// Declaring the flags twice is an error naming the flag.
	if err := build.RegisterFlags(fs, cells); !errors.Is(err, cell.ErrDuplicateFlag) || !strings.Contains(err.Error(), "--level") {
		t.Fatalf("RegisterFlags again = %v, want ErrDuplicateFlag naming --level", err)
	}
}

func TestModuleProviders(t *testing.T) {
	type label string
	var got []string
	record := func(l label) { got = append(got, string(l)) }
	c := dig.New()
	err := build.Build(c, build.Options{ModuleProviders: func(id string, path []string) []any {
		return []any{func() label { return label(id + "<" + strings.Join(path, ".") + ">") }}
	}}, root(
		cell.Invoke(record),
		cell.Module("a", "A", cell.Module("b", "B", cell.Invoke(record))),
	))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "<> b<a.b>" {
		t.Fatalf("labels %v", got)
	}
}

func TestShortFuncName(t *testing.T) {
	if got := build.ShortFuncName("github.com/x/y/pkg.newThing.func1"); got != "pkg.newThing.func1" {
		t.Fatalf("ShortFuncName = %q", got)
	}
	if got := build.ShortFuncName("github.com/x/y/pkg.(*T).m-fm"); got != "pkg.(*T).m" {
		t.Fatalf("ShortFuncName of a method value = %q", got)
	}
	if got := build.FuncName(42); got != "int" {
		t.Fatalf("FuncName(42) = %q", got)
	}
}
