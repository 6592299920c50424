package build

import (
	"fmt"
	"io"
	"reflect"
	"runtime"
	"strings"
)

// WriteTree prints the cell tree below root as the hive's "cells" command
// shows it: one cell a line, indented by depth, groups flattened into their
// parent (they add no scope), and under each module (and the root) the
// hooks it appended, from hooks keyed by dotted module path ("" for the
// root).
func WriteTree(w io.Writer, root *Node, hooks map[string][]string) error {
	var b strings.Builder
	b.WriteString("hive\n")
	writeNode(&b, root, nil, hooks, 1)
	writeLines(&b, 1, "hooks", hooks[""])
	_, err := io.WriteString(w, b.String())
	return err
}

// writeNode prints n and the cells inside it at depth.
func writeNode(b *strings.Builder, n *Node, path []string, hooks map[string][]string, depth int) {
	if n == nil {
		return
	}
	switch n.Kind {
	case KindGroup:
		for _, c := range n.Children {
			writeNode(b, c, path, hooks, depth)
		}
	case KindModule:
		head := "module " + n.ID
		if n.Title != "" {
			head += " (" + n.Title + ")"
		}
		writeLines(b, depth, head, nil)
		path = append(path[:len(path):len(path)], n.ID)
		for _, c := range n.Children {
			writeNode(b, c, path, hooks, depth+1)
		}
		writeLines(b, depth+1, "hooks", hooks[strings.Join(path, ".")])
	case KindDecorate:
		writeLines(b, depth, string(n.Kind), signatures(n.Funcs))
		for _, c := range n.Children {
			writeNode(b, c, path, hooks, depth+1)
		}
	case KindConfig:
		writeLines(b, depth, "config "+n.Config.TypeName(), n.Config.Usage())
	case KindWhen:
		writeLines(b, depth, "when "+n.Title, nil)
		for _, c := range n.Children {
			writeNode(b, c, path, hooks, depth+1)
		}
	default: // provide, provide-private, invoke
		writeLines(b, depth, string(n.Kind), signatures(n.Funcs))
	}
}

// writeLines prints "head", "head: detail" or head with one detail a line.
// A hooks line without hooks is left out.
func writeLines(b *strings.Builder, depth int, head string, details []string) {
	indent := strings.Repeat("  ", depth)
	switch {
	case head == "hooks" && len(details) == 0:
	case len(details) == 0:
		fmt.Fprintf(b, "%s%s\n", indent, head)
	case len(details) == 1:
		fmt.Fprintf(b, "%s%s: %s\n", indent, head, details[0])
	default:
		fmt.Fprintf(b, "%s%s:\n", indent, head)
		for _, d := range details {
			fmt.Fprintf(b, "%s    %s\n", indent, d)
		}
	}
}

func signatures(funcs []any) []string {
	out := make([]string, len(funcs))
	for i, fn := range funcs {
		out[i] = funcSignature(fn)
	}
	return out
}

// FuncName is the short name of a function ("pkg.newThing.func1"), or the
// value's type if it is not a function.
func FuncName(fn any) string {
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

// ShortFuncName drops the import path from a runtime function name, and
// the "-fm" the runtime adds to a method value:
// "github.com/x/y/pkg.newThing.func1" becomes "pkg.newThing.func1",
// "github.com/x/y/pkg.(*T).m-fm" becomes "pkg.(*T).m".
func ShortFuncName(name string) string {
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	return strings.TrimSuffix(name, "-fm")
}

// funcSignature is "name(param, ...) → result, ..." with errors left out of
// the results.
func funcSignature(fn any) string {
	t := reflect.TypeOf(fn)
	if t == nil || t.Kind() != reflect.Func {
		return FuncName(fn)
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
	s := fmt.Sprintf("%s(%s)", FuncName(fn), strings.Join(in, ", "))
	if len(out) > 0 {
		s += " → " + strings.Join(out, ", ")
	}
	return s
}
