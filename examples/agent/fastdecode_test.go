package main

import (
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// checkDirect fails t unless decodeBlockDirect either declines data or
// decodes it as the nodes' path does (no error, the same objects and
// lines); it returns whether it decoded.
func checkDirect(t *testing.T, data []byte) bool {
	t.Helper()
	got := desiredFile{objects: map[string][]any{}, lines: map[string][]int{}}
	if !decodeBlockDirect(data, &got) {
		if len(got.objects) > 0 || len(got.lines) > 0 {
			t.Fatalf("declined but changed the file's objects:\n%s", data)
		}
		return false
	}
	// The nodes' path, and the library's parse alone (not the line walker
	// both fast paths share).
	var doc yaml.Node
	for _, nodes := range []func([]byte, *desiredFile) error{decodeYAMLNodes, func(data []byte, f *desiredFile) error {
		if err := yaml.Unmarshal(data, &doc); err != nil {
			return err
		}
		return decodeYAMLDoc(&doc, f)
	}} {
		want := desiredFile{objects: map[string][]any{}, lines: map[string][]int{}}
		if err := nodes(data, &want); err != nil {
			t.Fatalf("decoded what the nodes' path rejects (%v):\n%s", err, data)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded\n%#v\nthe nodes' path\n%#v\nin:\n%s", got, want, data)
		}
	}
	return true
}

// Random entries of known and wrong field names with values the library
// reads in many ways (nulls, numbers of every base and shape, times,
// quotes, indicators): whatever the direct decode takes, it takes as the
// library does.
func TestDecodeBlockDirectRandom(t *testing.T) {
	fields := map[string][]string{
		"routes":  {"prefix", "via", "dev", "type", "table", "metric", "status", "Prefix"},
		"sysctls": {"name", "value"},
		"rules":   {"table", "chain", "name", "priority", "spec"},
	}
	values := strings.Fields(`10.0.0.0/8 '10.0.0.0/8' "10.0.0.1" ::1 fe80::1 2001:db8::/32 1 -1 0 00 -0 +1 1_0 0x1f 0o7 0b1
		1e3 1.5 .inf .nan true yes on y ~ null NULL Null nULL '' "" 'null' "~" a:b -x x- 2001-12-14 2001-12-14t21:59:43.10-05:00
		123456789012345678 9223372036854775807 = << a'b "a'b" \n "\n" blackhole !x &a *a %x @x ` + "`x" + ` | > a#b x: ?x ,x
		10.0.0.0/33 0.0.0.0/0 4294967296 99999999999999999999`)
	rng := rand.New(rand.NewPCG(5, 6))
	decoded := 0
	for range 20_000 {
		var b strings.Builder
		keys := []string{"routes", "sysctls", "rules"}
		rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		for _, k := range keys[:1+rng.IntN(2)] {
			b.WriteString(k + ":\n")
			for range 1 + rng.IntN(2) {
				for j := range 1 + rng.IntN(3) {
					if j == 0 {
						b.WriteString("  - ")
					} else {
						b.WriteString("    ")
					}
					b.WriteString(fields[k][rng.IntN(len(fields[k]))] + ": " + values[rng.IntN(len(values))] + "\n")
				}
			}
		}
		if checkDirect(t, []byte(b.String())) {
			decoded++
		}
	}
	if decoded < 500 {
		t.Errorf("only %d of 20,000 random files decoded directly: the test tries too little", decoded)
	}
}

// The direct decode reads the sample and generated files as the nodes'
// path does, and declines every entry in doubt, which that path decodes
// otherwise or names as an error.
func TestDecodeBlockDirect(t *testing.T) {
	sample, err := os.ReadFile("desired.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, data := range [][]byte{sample, restartDesired(300, 300), idleDesired(), []byte(crashDesired(1, 3))} {
		if !checkDirect(t, data) {
			t.Errorf("declined a file of the common shape:\n%.300s", data)
		}
	}
	decoded := []string{
		"routes:\n- prefix: 10.0.0.0/8\n  type: blackhole\n",
		"routes:\n  - prefix: '10.0.0.0/8'\n    via: \"10.0.0.1\"\n    table: 100\n    metric: 0\n",
		"sysctls:\n  - name: 1\n    value: true\n  - name: x\n    value: 0x10\n",
		"rules:\n  - table: filter\n    chain: INPUT\n    name: a\n    priority: -7\n    spec: -p tcp -j ACCEPT\n",
		"routes:\n  - metric: 123456789012345678\n",
	}
	declined := []string{
		"routes:\n  - prefix: 10.0.0.0/8\n    status: {}\n",         // status is not desired state
		"routes:\n  - prefix: 10.0.0.0/8\n    color: red\n",         // unknown field
		"routes:\n  - prefix: 10.0.0.0/8\n    prefix: 10.0.0.0/9\n", // given twice
		"routes:\n  - prefix: 10.0.0.0/33\n",                        // does not decode
		"routes:\n  - prefix: ~\n", "sysctls:\n  - name: null\n",    // nulls
		"routes:\n  - metric: 010\n", "routes:\n  - metric: 0x10\n", // not plainly decimal
		"routes:\n  - metric: '10'\n", "routes:\n  - metric: 1_0\n", // a string, a separator
		"routes:\n  - metric: 1234567890123456789\n",                                           // long
		"routes:\n  - metric: +1\n", "routes:\n  - metric: -0\n", "routes:\n  - metric: 1.0\n", // signs, a float
		"routes:\n  - prefix: 10.0.0.0/8\nroutes:\n  - prefix: 10.1.0.0/16\n", // a key twice
		"things:\n  - a: b\n", // an unknown key
		"routes: [{prefix: 10.0.0.0/8}]\n",
	}
	for _, s := range decoded {
		if !checkDirect(t, []byte(s)) {
			t.Errorf("declined:\n%s", s)
		}
	}
	for _, s := range declined {
		if checkDirect(t, []byte(s)) {
			t.Errorf("decoded, in doubt:\n%s", s)
		}
	}
}

// Whatever the input, decodeBlockDirect declines it or decodes it as the
// nodes' path does.
func FuzzDecodeBlockDirect(f *testing.F) {
	f.Add(string(restartDesired(2, 2)))
	f.Add("routes:\n- prefix: 10.0.0.0/8\n  type: blackhole\n  metric: 5\n")
	f.Add("rules:\n  - spec: \"-m comment --comment 'x y' -j ACCEPT\"\n    priority: 0x10\n")
	f.Add("sysctls:\n  -   name: 'c'\n      value: -e f\n  # x\n  - name: h:i\n")
	f.Add("routes:\n  - prefix: 2001:db8::/32\n    via: fe80::1\n    dev: eth0\n    table: 7\n")
	f.Fuzz(func(t *testing.T, s string) {
		if strings.Count(s, "\n") > 200 {
			return
		}
		checkDirect(t, []byte(s))
	})
}

// BenchmarkDecodeFile decodes a file of 50,000 routes and 10,000 rules
// (a cold start's first decode, without the entry cache), straight and
// through the library's nodes: entries-s and allocated bytes per file.
func BenchmarkDecodeFile(b *testing.B) {
	data := restartDesired(50_000, 10_000)
	for _, c := range []struct {
		name   string
		decode func([]byte, *desiredFile) error
	}{
		{"direct", func(data []byte, f *desiredFile) error { return decodeYAML("d.yaml", data, f) }},
		{"nodes", decodeYAMLNodes},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				f := desiredFile{objects: map[string][]any{}, lines: map[string][]int{}}
				if err := c.decode(data, &f); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(60_000*b.N)/b.Elapsed().Seconds(), "entries/s")
		})
	}
}
