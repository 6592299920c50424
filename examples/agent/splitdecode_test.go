package main

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/steadystate/steadystate/reflector"
)

// randomDesired is a desired file of the block shape, or nearly: its
// kinds in a random order (one perhaps twice), entries valid or not,
// duplicates near and far, comments and blank lines, and now and then an
// item at another column, a line not of the shape or a key with nothing.
func randomDesired(rng *rand.Rand) string {
	var b strings.Builder
	sections := []string{"sysctls", "routes", "rules"}
	rng.Shuffle(len(sections), func(i, j int) { sections[i], sections[j] = sections[j], sections[i] })
	sections = sections[:1+rng.IntN(3)]
	if rng.IntN(15) == 0 {
		sections = append(sections, sections[rng.IntN(len(sections))]) // a key twice
	}
	odd := func() bool { return rng.IntN(400) == 0 }
	for _, s := range sections {
		b.WriteString(s + ":\n")
		first := -1
		n := 1 + rng.IntN(40)
		if odd() {
			n = 0
		}
		for i := range n {
			dash := "  "
			if odd() {
				dash = "    "
			}
			switch rng.IntN(20) {
			case 0:
				b.WriteString("\n")
			case 1:
				b.WriteString("  # a comment\n")
			}
			v := rng.IntN(4096)
			if first < 0 {
				first = v
			} else if rng.IntN(100) == 0 {
				v = first // a duplicate, far from the first
			}
			switch s {
			case "sysctls":
				fmt.Fprintf(&b, "%s- name: net.ipv4.conf.d%d.forwarding\n%s  value: \"%d\"\n", dash, v, dash, i%2)
			case "routes":
				prefix := fmt.Sprintf("10.%d.%d.0/24", v>>4, v&15)
				if odd() {
					prefix = "10.0.0.1/24" // host bits set
				}
				fmt.Fprintf(&b, "%s- prefix: %s\n%s  type: blackhole\n", dash, prefix, dash)
			case "rules":
				fmt.Fprintf(&b, "%s- table: filter\n%s  chain: INPUT\n%s  name: r%d\n%s  spec: -s 10.0.%d.0/24 -j ACCEPT\n", dash, dash, dash, v, dash, v)
			}
			if odd() {
				b.WriteString("  not: [of, the, shape]\n")
			}
		}
	}
	return b.String()
}

// twoProcs makes GOMAXPROCS at least 2 (a decode in parts needs two);
// the function returned puts it back.
func twoProcs() func() {
	procs := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(max(procs, 2))
	return func() { runtime.GOMAXPROCS(procs) }
}

// decodeParts decodes data in up to n parts, on workers goroutines.
func decodeParts(data []byte, n, workers int) ([]reflector.Item[fileObject], bool) {
	d := newPartedDecode("d.yaml", data, n)
	if d == nil {
		return nil, false
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(d.work)
	}
	d.work()
	wg.Wait()
	return d.result()
}

// A decode in parts gives decodeWhole's items, or declines: for every
// file, good or bad, in 2 to 8 parts, it never takes one decodeWhole
// refuses nor makes other items of one it takes; and it takes most good
// files.
func TestDecodeSplitModel(t *testing.T) {
	defer twoProcs()()
	defer func(n int) { splitAbove = n }(splitAbove)
	splitAbove = 0
	rng := rand.New(rand.NewPCG(7, 8))
	taken, good := 0, 0
	for round := range 3000 {
		data := []byte(randomDesired(rng))
		want, err := decodeWhole("d.yaml", data)
		got, ok := decodeParts(data, 2+round%7, 1+round%3)
		if err == nil {
			good++
		}
		if !ok {
			continue
		}
		taken++
		if err != nil {
			t.Fatalf("round %d: the split took a file the whole decode refuses (%v):\n%s", round, err, data)
		}
		if len(got) != len(want) {
			t.Fatalf("round %d: %d items, want %d:\n%s", round, len(got), len(want), data)
		}
		for i := range got {
			if got[i].Table != want[i].Table || got[i].Key != want[i].Key || !got[i].Value.equal(want[i].Value) {
				t.Fatalf("round %d: item %d is %s %s %v, want %s %s %v:\n%s", round, i,
					got[i].Table, got[i].Key, got[i].Value.obj, want[i].Table, want[i].Key, want[i].Value.obj, data)
			}
		}
	}
	t.Logf("%d good files of 3000; the split took %d", good, taken)
	if taken < good/2 {
		t.Fatalf("the split took %d of %d good files, want most", taken, good)
	}
}

// A start's file is decoded in parts: eight at 50,000 routes and 10,000
// rules, split in routes and in rules.
func TestDecodeSplitTakesAStartsFile(t *testing.T) {
	defer twoProcs()()
	data := restartDesired(50_000, 10_000)
	key, at, ok := splitPoint(data, len(data)/2)
	if !ok || key != "routes" || at < len(data)/2 || at > len(data)/2+200 {
		t.Fatalf("split at %q %d of %d (%v), want an item of routes just after the middle", key, at, len(data), ok)
	}
	d := newPartedDecode("d.yaml", data, partsFor(len(data)))
	if d == nil || len(d.parts) != maxParts || !slices.Contains(d.keys, "rules") {
		t.Fatalf("parts of a start's file: %v", d)
	}
	items, ok := decodeSplit("d.yaml", data)
	want, err := decodeWhole("d.yaml", data)
	if !ok || err != nil || !sameItems(items, want) {
		t.Fatalf("split: %d items (%v), whole: %d (%v)", len(items), ok, len(want), err)
	}
}

// The split declines what the whole decode reads otherwise or refuses:
// the items from the middle on at another column, a kind on both sides,
// the same route on both sides.
func TestDecodeSplitDeclines(t *testing.T) {
	defer twoProcs()()
	defer func(n int) { splitAbove = n }(splitAbove)
	splitAbove = 0
	routes := func(from, to int, dash string) string {
		var b strings.Builder
		for i := from; i < to; i++ {
			fmt.Fprintf(&b, "%s- prefix: 10.%d.%d.0/24\n%s  type: blackhole\n", dash, i>>8, i&255, dash)
		}
		return b.String()
	}
	rule := "rules:\n  - table: filter\n    chain: INPUT\n    name: a\n    spec: -j ACCEPT\n"
	for name, data := range map[string]string{
		"another column":        anotherColumn(routes),
		"a kind on both sides":  rule + "routes:\n" + routes(0, 200, "  ") + rule,
		"a route on both sides": "routes:\n" + routes(0, 100, "  ") + routes(99, 199, "  "),
		"a route in parts 1, 3": "routes:\n" + routes(0, 100, "  ") + routes(100, 200, "  ") + routes(10, 11, "  ") + routes(200, 300, "  "),
	} {
		if _, ok := decodeSplit("d.yaml", []byte(data)); ok {
			items, err := decodeWhole("d.yaml", []byte(data))
			t.Errorf("%s: the split took the file; the whole decode gives %d items, %v", name, len(items), err)
		}
		parted := 0
		for n := 2; n <= maxParts; n++ {
			if newPartedDecode("d.yaml", []byte(data), n) != nil {
				parted++
			}
			if _, ok := decodeParts([]byte(data), n, 2); ok {
				t.Errorf("%s: %d parts took the file", name, n)
			}
		}
		if parted == 0 && name != "another column" {
			t.Errorf("%s: never split: the test checks nothing", name)
		}
	}
}

// anotherColumn is a file of routes whose items from the one on the
// middle's line on are at another column: each half alone is good.
func anotherColumn(routes func(from, to int, dash string) string) string {
	for at := 1; at < 200; at++ {
		head, tail := "routes:\n"+routes(0, at, "  "), routes(at, 200, "    ")
		// The middle on the first line of item at: the halves meet there.
		first, _, _ := strings.Cut(tail, "\n")
		if mid := (len(head) + len(tail)) / 2; len(head) <= mid && mid < len(head)+len(first) {
			return head + tail
		}
	}
	panic("no such file")
}

// FuzzDecodeSplit: whatever the file, a decode in parts takes it only
// with the whole decode's items.
func FuzzDecodeSplit(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 1))
	for range 20 {
		f.Add(randomDesired(rng))
	}
	f.Fuzz(func(t *testing.T, s string) {
		defer twoProcs()()
		defer func(n int) { splitAbove = n }(splitAbove)
		splitAbove = 0
		got, ok := decodeParts([]byte(s), 2+len(s)%7, 2)
		if !ok {
			return
		}
		want, err := decodeWhole("d.yaml", []byte(s))
		if err != nil || len(got) != len(want) {
			t.Fatalf("the split took %d items, the whole decode gives %d, %v", len(got), len(want), err)
		}
		for i := range got {
			if got[i].Table != want[i].Table || got[i].Key != want[i].Key || !got[i].Value.equal(want[i].Value) {
				t.Fatalf("item %d: %s %s, want %s %s", i, got[i].Table, got[i].Key, want[i].Table, want[i].Key)
			}
		}
	})
}
