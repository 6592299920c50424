package cell

import (
	"fmt"
	"io"
	"reflect"
	"runtime"
	"strings"
)

// Kinds of Info nodes.
const (
	KindModule         = "module"
	KindProvide        = "provide"
	KindProvidePrivate = "provide-private"
	KindInvoke         = "invoke"
	KindDecorate       = "decorate"
	KindGroup          = "group"
	KindConfig         = "config"
	KindHook           = "hooks" // added by the runtime after Build
	KindRoot           = "hive"  // the root of a printed tree
)

// Info describes a cell for the cell tree printout. It is plain data: the
// runtime may add nodes (such as the lifecycle hooks of a module) before
// printing it with WriteTree.
type Info struct {
	Kind     string   // one of the Kind constants
	Name     string   // module id or config type
	Title    string   // module title
	Details  []string // one line each: function signatures, flags, hook names
	Children []Info
}

func infos(cells []Cell) []Info {
	out := make([]Info, 0, len(cells))
	for _, c := range cells {
		out = append(out, c.Info())
	}
	return out
}

// WriteTree prints the tree rooted at i, indented by depth. Groups are
// flattened into their parent since they add no scope.
func WriteTree(w io.Writer, i Info) error {
	var b strings.Builder
	writeInfo(&b, i, 0)
	_, err := io.WriteString(w, b.String())
	return err
}

func writeInfo(b *strings.Builder, i Info, depth int) {
	if i.Kind == KindGroup {
		for _, c := range i.Children {
			writeInfo(b, c, depth)
		}
		return
	}
	indent := strings.Repeat("  ", depth)
	head := i.Kind
	if i.Name != "" {
		head += " " + i.Name
	}
	if i.Title != "" {
		head += fmt.Sprintf(" (%s)", i.Title)
	}
	switch len(i.Details) {
	case 0:
		fmt.Fprintf(b, "%s%s\n", indent, head)
	case 1:
		fmt.Fprintf(b, "%s%s: %s\n", indent, head, i.Details[0])
	default:
		fmt.Fprintf(b, "%s%s:\n", indent, head)
		for _, d := range i.Details {
			fmt.Fprintf(b, "%s    %s\n", indent, d)
		}
	}
	for _, c := range i.Children {
		writeInfo(b, c, depth+1)
	}
}

// funcName is the short name of a function ("pkg.newThing.func1"), or the
// value's type if it is not a function.
func funcName(fn any) string {
	v := reflect.ValueOf(fn)
	if v.Kind() != reflect.Func || v.IsNil() {
		return fmt.Sprintf("%T", fn)
	}
	f := runtime.FuncForPC(v.Pointer())
	if f == nil {
		return v.Type().String()
	}
	return ShortFuncName(f.Name())
}

// ShortFuncName drops the import path from a runtime function name:
// "github.com/x/y/pkg.newThing.func1" becomes "pkg.newThing.func1".
func ShortFuncName(name string) string {
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	return name
}

// funcSignature is "name(param, ...) → result, ..." with errors left out of
// the results.
func funcSignature(fn any) string {
	t := reflect.TypeOf(fn)
	if t == nil || t.Kind() != reflect.Func {
		return funcName(fn)
	}
	var in, out []string
	for i := range t.NumIn() {
		in = append(in, t.In(i).String())
	}
	errType := reflect.TypeFor[error]()
	for i := range t.NumOut() {
		if t.Out(i) != errType {
			out = append(out, t.Out(i).String())
		}
	}
	s := fmt.Sprintf("%s(%s)", funcName(fn), strings.Join(in, ", "))
	if len(out) > 0 {
		s += " → " + strings.Join(out, ", ")
	}
	return s
}
