package statedb

import (
	"encoding/json"
	"strings"
	"testing"
)

// RenderTable flattens nested objects into dotted columns, knowing nothing
// of the objects' types; objects that hold a status (as the reconciler's
// Status marshals: kind, updatedAt, error) read as a kind and an error
// column.
func TestRenderTableShapes(t *testing.T) {
	for _, tc := range []struct {
		name string
		objs []string
		want string
	}{{
		name: "nested status",
		objs: []string{
			`{"prefix":"10.0.0.0/8","dev":"eth0","status":{"kind":"Done","updatedAt":"2026-01-02T03:04:05Z"}}`,
			`{"prefix":"10.1.0.0/16","via":"10.0.0.1","dev":"eth1","status":{"kind":"Error","updatedAt":"2026-01-02T03:04:06Z","error":"no route to host"}}`,
		},
		want: `
PREFIX       VIA       DEV   STATUS.KIND  STATUS.UPDATEDAT      STATUS.ERROR      REVISION
10.0.0.0/8             eth0  Done         2026-01-02T03:04:05Z                    1
10.1.0.0/16  10.0.0.1  eth1  Error        2026-01-02T03:04:06Z  no route to host  2
`,
	}, {
		name: "scalars, arrays, null and deep nesting",
		objs: []string{
			`{"id":18446744073709551615,"on":true,"tags":["a","b"],"ports":[80,443],"pairs":[{"k":1}],"note":null,"a":{"b":{"c":"deep"}}}`,
		},
		want: `
ID                    ON    TAGS  PORTS   PAIRS      NOTE  A.B.C  REVISION
18446744073709551615  true  a,b   80,443  [{"k":1}]        deep   1
`,
	}, {
		name: "values that are not objects",
		objs: []string{`"plain"`, `42`},
		want: `
VALUE  REVISION
plain  1
42     2
`,
	}, {
		name: "no objects",
		want: `
REVISION
`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []ObjectJSON
			for i, o := range tc.objs {
				objs = append(objs, ObjectJSON{Revision: Revision(i + 1), Object: json.RawMessage(o)})
			}
			var b strings.Builder
			if err := RenderTable(&b, objs); err != nil {
				t.Fatal(err)
			}
			got := strings.Join(trimLines(b.String()), "\n")
			want := strings.Join(trimLines(strings.TrimPrefix(tc.want, "\n")), "\n")
			if got != want {
				t.Fatalf("got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
	if err := RenderTable(&strings.Builder{}, []ObjectJSON{{Revision: 3, Object: json.RawMessage(`{"a":`)}}); err == nil || !strings.Contains(err.Error(), "revision 3") {
		t.Fatalf("RenderTable of broken JSON: %v, want an error naming the revision", err)
	}
}

// trimLines splits s into lines without trailing blanks (tabwriter pads).
func trimLines(s string) []string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return lines
}
