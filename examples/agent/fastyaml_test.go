package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// sameNodes reports how a differs from b (the library's), or "": kind,
// style, tag, value, line, column and content, all but comments (and the
// document's own position, which nothing reads).
func sameNodes(a, b *yaml.Node, path string) string {
	if a.Kind != b.Kind || a.Style != b.Style || a.Tag != b.Tag || a.Value != b.Value || len(a.Content) != len(b.Content) ||
		a.Kind != yaml.DocumentNode && (a.Line != b.Line || a.Column != b.Column) {
		return fmt.Sprintf("%s: kind %v style %v tag %q value %q at %d:%d with %d children, the library's kind %v style %v tag %q value %q at %d:%d with %d",
			path, a.Kind, a.Style, a.Tag, a.Value, a.Line, a.Column, len(a.Content), b.Kind, b.Style, b.Tag, b.Value, b.Line, b.Column, len(b.Content))
	}
	for i := range a.Content {
		if d := sameNodes(a.Content[i], b.Content[i], fmt.Sprintf("%s/%d", path, i)); d != "" {
			return d
		}
	}
	return ""
}

// checkBlockYAML fails t unless parseBlockYAML either declines data or
// returns the library's nodes for it; it returns whether it accepted.
func checkBlockYAML(t *testing.T, data []byte) bool {
	t.Helper()
	got, ok := parseBlockYAML(data)
	if !ok {
		return false
	}
	var want yaml.Node
	if err := yaml.Unmarshal(data, &want); err != nil {
		t.Fatalf("accepted what the library rejects (%v):\n%s", err, data)
	}
	if d := sameNodes(got, &want, ""); d != "" {
		t.Fatalf("%s\nin:\n%s", d, data)
	}
	return true
}

// The fast path reads the sample, generated files and common variants
// exactly as the library does, and declines what is outside its shape.
func TestParseBlockYAML(t *testing.T) {
	sample, err := os.ReadFile("desired.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, data := range [][]byte{sample, restartDesired(300, 300), idleDesired(), []byte(crashDesired(1, 3))} {
		if !checkBlockYAML(t, data) {
			t.Errorf("declined a file of the common shape:\n%.300s", data)
		}
	}
	accepted := []string{
		"routes:\n- prefix: 10.0.0.0/8\n  type: blackhole\n",
		"# c\n\nsysctls:\n    -   name: a.b\n        value: '1'   \n  # c\n\n        # c\n",
		"rules:\n  - spec: \"-m comment --comment 'x y' -j ACCEPT\"\n    priority: 0x10\n    name: ~\n    table: true\n",
		"routes:\n  - prefix: 10.0.0.0/8\nsysctls:\n- name: x",
		"a:\n - b: null\n   c: .inf\n   d: -.INF\n   e: 1_000\n   f: 0o17\n   g: 2001-12-14 21:59:43.10\n   h: 2001-12-14\n   i: 1e3\n   j: .5\n   k: -0x1F\n   l: 12:30\n   m: False\n   n: +1\n",
	}
	declined := []string{
		"", "{}\n", "# only\n", "routes: []\n", "routes:\n", "routes:\nsysctls:\n  - name: x\n",
		"routes:\n  - prefix: 10.0.0.0/8\n    type: blackhole # c\n",
		"routes:\n  - prefix: 10.0.0.0/8\n      type: blackhole\n",
		"routes:\n  - prefix: 10.0.0.0/8\n   type: blackhole\n",
		"rules:\n  - spec: -p tcp\n      --dport 22\n",
		"rules:\n  - spec: \"a\\tb\"\n",
		"rules:\n  - spec: a: b\n",
		"rules:\n  - spec: |\n      x\n",
		"rules:\n  - spec: &a x\n", "rules:\n  - spec: *a\n", "rules:\n  - spec: !!str x\n",
		"rules:\n  - spec: [a]\n", "rules:\n  - spec: {a: b}\n", "rules:\n  - spec:\n",
		"rules:\n  - - a\n", "rules:\n  -\n", "rules:\n  - x\n", "---\nrules:\n  - a: b\n",
		"rules:\n\t- a: b\n", "rules:\r\n  - a: b\r\n", "rul\u00e9s:\n  - a: b\n", "rules:\n  - <<: b\n",
		" rules:\n  - a: b\n", "rules: # c\n  - a: b\n",
	}
	for _, s := range accepted {
		if !checkBlockYAML(t, []byte(s)) {
			t.Errorf("declined:\n%s", s)
		}
	}
	for _, s := range declined {
		if checkBlockYAML(t, []byte(s)) {
			t.Errorf("accepted, outside the shape:\n%s", s)
		}
	}
}

// Whatever the input, parseBlockYAML declines it or reads it as the
// library does.
func FuzzParseBlockYAML(f *testing.F) {
	f.Add(string(restartDesired(2, 2)))
	f.Add("routes:\n- prefix: 10.0.0.0/8\n  type: blackhole\n")
	f.Add("rules:\n  - spec: \"-m comment --comment 'x y' -j ACCEPT\"\n    priority: 0x10\n")
	f.Add("a:\n  -   b: 'c'\n      d: -e f\n  # x\n  - g: h:i\n")
	f.Fuzz(func(t *testing.T, s string) {
		if strings.Count(s, "\n") > 200 {
			return
		}
		checkBlockYAML(t, []byte(s))
	})
}
