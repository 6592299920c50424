package hive_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
)

// modeConfig chooses between two modes.
type modeConfig struct{ Fleet bool }

func (def modeConfig) Flags(fs *pflag.FlagSet) { fs.Bool("fleet", def.Fleet, "fleet mode") }

// fileConfig is a config inside one mode only.
type fileConfig struct{ Path string }

func (def fileConfig) Flags(fs *pflag.FlagSet) { fs.String("path", def.Path, "file mode's file") }

// When builds its cells only if its condition holds on the config: the
// other mode's modules neither run nor appear in health; the flags of
// both exist; the tree shows both with their conditions.
func TestWhen(t *testing.T) {
	cells := func(built *[]string) []cell.Cell {
		return []cell.Cell{
			cell.Config(modeConfig{}),
			cell.When("file mode (no --fleet)", func(c modeConfig) bool { return !c.Fleet },
				cell.Module("file", "File mode",
					cell.Config(fileConfig{Path: "x"}),
					cell.Invoke(func(c fileConfig, h cell.Health) { *built = append(*built, "file:"+c.Path); h.OK("on") }),
				),
			),
			cell.When("fleet mode (--fleet)", func(c modeConfig) bool { return c.Fleet },
				cell.Module("fleet", "Fleet mode",
					cell.Invoke(func(h cell.Health) { *built = append(*built, "fleet"); h.OK("on") }),
				),
			),
		}
	}
	for _, tc := range []struct {
		args  []string
		want  string
		scope string
	}{
		{nil, "file:x", "file"},
		{[]string{"--path=y"}, "file:y", "file"},
		{[]string{"--fleet"}, "fleet", "fleet"},
	} {
		var built []string
		h := hive.NewWithOptions(hive.Options{Logger: quiet.Logger}, cells(&built)...)
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		fs.SetOutput(&bytes.Buffer{})
		h.RegisterFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if err := h.Populate(); err != nil {
			t.Fatal(err)
		}
		if strings.Join(built, ",") != tc.want {
			t.Errorf("%v: built %v, want %s", tc.args, built, tc.want)
		}
		var modules []string
		for _, c := range h.Health().Snapshot().Children {
			modules = append(modules, c.ID)
		}
		if strings.Join(modules, ",") != tc.scope {
			t.Errorf("%v: health has modules %v, want %s alone", tc.args, modules, tc.scope)
		}
	}

	var out bytes.Buffer
	cmd := hive.NewWithOptions(hive.Options{Logger: quiet.Logger}, cells(new([]string))...).Command()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"cells"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"  when file mode (no --fleet)\n    module file (File mode)\n", "  when fleet mode (--fleet)\n    module fleet (Fleet mode)\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("cells output lacks %q:\n%s", want, out.String())
		}
	}

	// A condition on a config nobody provides fails Populate.
	h := hive.NewWithOptions(hive.Options{Logger: quiet.Logger}, cell.When("never", func(c fileConfig) bool { return true }))
	if err := h.Populate(); !errors.Is(err, cell.ErrInvoke) || !strings.Contains(err.Error(), "never") {
		t.Fatalf("Populate: %v, want ErrInvoke naming the condition", err)
	}
}
