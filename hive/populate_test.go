package hive_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
)

type (
	secret   struct{ v string }
	needsDep struct{}
	missing  struct{}
)

func TestPopulateErrors(t *testing.T) {
	newSecret := func() *secret { return &secret{"s"} }
	tests := []struct {
		name    string
		cells   []cell.Cell
		wantErr error
		wantMsg []string // substrings of the error
	}{
		{
			name: "missing type names module and type",
			cells: []cell.Cell{cell.Module("a", "A",
				cell.Provide(func(*missing) *needsDep { return nil }),
				cell.Invoke(func(*needsDep) {}),
			)},
			wantErr: cell.ErrInvoke,
			wantMsg: []string{"module a:", "missing type: *hive_test.missing", "while building *hive_test.needsDep"},
		},
		{
			name: "duplicate type names both modules",
			cells: []cell.Cell{
				cell.Module("a", "A", cell.Provide(newSecret)),
				cell.Module("b", "B", cell.Provide(func() *secret { return nil })),
			},
			wantErr: cell.ErrProvide,
			wantMsg: []string{"module b:", "cannot provide *hive_test.secret", "in module a"},
		},
		{
			name: "private provider invisible to another module",
			cells: []cell.Cell{
				cell.Module("a", "A", cell.ProvidePrivate(newSecret)),
				cell.Module("b", "B", cell.Invoke(func(*secret) {})),
			},
			wantErr: cell.ErrInvoke,
			wantMsg: []string{"module b:", "missing type: *hive_test.secret"},
		},
		{
			name: "private provider invisible to the parent",
			cells: []cell.Cell{
				cell.Module("outer", "Outer",
					cell.Module("inner", "Inner", cell.ProvidePrivate(newSecret)),
					cell.Invoke(func(*secret) {}),
				),
			},
			wantErr: cell.ErrInvoke,
			wantMsg: []string{"module outer:", "missing type: *hive_test.secret"},
		},
		{
			name:    "invalid module id",
			cells:   []cell.Cell{cell.Module("a", "A", cell.Module("Bad_ID", "Bad"))},
			wantErr: cell.ErrInvalidModuleID,
			wantMsg: []string{"module a:", `"Bad_ID"`},
		},
		{
			name:    "empty module id",
			cells:   []cell.Cell{cell.Module("", "Empty")},
			wantErr: cell.ErrInvalidModuleID,
			wantMsg: []string{`""`, "must match [a-z][a-z0-9_-]{0,63}"},
		},
		{
			name:    "nil cell",
			cells:   []cell.Cell{cell.Module("a", "A", cell.Invoke(func() {}), nil)},
			wantErr: cell.ErrNilCell,
			wantMsg: []string{"module a:"},
		},
		{
			name:    "duplicate sibling module",
			cells:   []cell.Cell{cell.Module("a", "A"), cell.Module("a", "A again")},
			wantErr: cell.ErrDuplicateModule,
		},
		{
			name:    "constructor error names the constructor",
			cells:   []cell.Cell{cell.Module("a", "A", cell.Provide(func() (*secret, error) { return nil, errors.New("boom") }), cell.Invoke(func(*secret) {}))},
			wantErr: cell.ErrInvoke,
			wantMsg: []string{"module a:", "failed: boom", "while building *hive_test.secret"},
		},
		{
			name:    "provide of a non-function",
			cells:   []cell.Cell{cell.Module("a", "A", cell.Provide(42))},
			wantErr: cell.ErrProvide,
			wantMsg: []string{"module a: provide int"},
		},
		{
			name:    "duplicate of a hive-provided type",
			cells:   []cell.Cell{cell.Provide(func() *slog.Logger { return nil })},
			wantErr: cell.ErrProvide,
			wantMsg: []string{"*slog.Logger"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := newHive(tt.cells...).Populate()
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Populate = %v, want %v", err, tt.wantErr)
			}
			for _, s := range tt.wantMsg {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestVisibility(t *testing.T) {
	var inner, sibling *secret
	var gotIDs []string
	h := newHive(
		cell.Module("outer", "Outer",
			cell.ProvidePrivate(func(id cell.FullModuleID) *secret { return &secret{id.String()} }),
			cell.Module("inner", "Inner", cell.Invoke(func(s *secret, id cell.ModuleID) {
				inner = s
				gotIDs = append(gotIDs, string(id))
			})),
		),
		// Same type, private to another module: no conflict.
		cell.Module("other", "Other",
			cell.ProvidePrivate(func() *secret { return &secret{"other"} }),
			cell.Invoke(func(s *secret) { sibling = s }),
		),
	)
	if err := h.Populate(); err != nil {
		t.Fatal(err)
	}
	if inner == nil || inner.v != "outer" {
		t.Errorf("sub-module got %+v, want the outer module's private value", inner)
	}
	if sibling == nil || sibling.v != "other" {
		t.Errorf("other module got %+v, want its own value", sibling)
	}
	if len(gotIDs) != 1 || gotIDs[0] != "inner" {
		t.Errorf("ModuleID = %v, want [inner]", gotIDs)
	}
	if err := h.Populate(); err != nil {
		t.Fatalf("second Populate = %v, want the first result", err)
	}
}

type greeting string

func TestDecorate(t *testing.T) {
	var inside, outside greeting
	h := newHive(
		cell.Provide(func() greeting { return "hello" }),
		cell.Decorate(func(g greeting) greeting { return g + ", decorated" },
			cell.Invoke(func(g greeting) { inside = g }),
		),
		cell.Invoke(func(g greeting) { outside = g }),
	)
	if err := h.Populate(); err != nil {
		t.Fatal(err)
	}
	if inside != "hello, decorated" || outside != "hello" {
		t.Fatalf("inside %q outside %q", inside, outside)
	}
}

func TestModuleLogger(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: dropTime}))
	h := hive.NewWithOptions(hive.Options{Logger: log},
		cell.Module("outer", "Outer", cell.Module("inner", "Inner",
			cell.Invoke(func(l *slog.Logger) { l.Info("hi") }))),
		cell.Invoke(func(l *slog.Logger) { l.Info("root") }),
	)
	if err := h.Populate(); err != nil {
		t.Fatal(err)
	}
	want := "level=INFO msg=hi module=outer.inner\nlevel=INFO msg=root\n"
	if buf.String() != want {
		t.Fatalf("log = %q, want %q", buf.String(), want)
	}
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
