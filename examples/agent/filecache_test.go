package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/steadystate/steadystate/internal/memtest"
	"github.com/steadystate/steadystate/reflector"
)

// sameItems tells whether two decodes hold the same items, in order.
func sameItems(got, want []reflector.Item[fileObject]) bool {
	return slices.EqualFunc(got, want, func(a, b reflector.Item[fileObject]) bool {
		return a.Table == b.Table && a.Key == b.Key && a.Value.equal(b.Value)
	})
}

// sameDecode checks that the cache's decode of data is the whole file's.
func sameDecode(t *testing.T, c *entryCache[fileObject], data []byte) error {
	t.Helper()
	got, gotErr := c.decode("desired.yaml", data)
	c.settle() // the fill of a first version, if any, is done
	want, wantErr := decodeFileItems("desired.yaml", data)
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("error %v, want %v, for:\n%s", gotErr, wantErr, data)
	}
	if !sameItems(got, want) {
		t.Fatalf("items %v, want %v, for:\n%s", got, want, data)
	}
	return wantErr
}

// TestEntryCacheModel decodes random versions of a desired file, each a
// few edits from the one before (entries changed, added, removed, moved,
// sections moved), most of them good, some with one fault of their own
// (an entry broken, repeated, commented, of another shape, a key
// repeated or unknown), with one cache, and checks each result against
// the whole file's decode: the same items in the same order, or the same
// error.
func TestEntryCacheModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	next := 0 // routes and rules get new keys
	entry := func(key string) string {
		next++
		switch key {
		case "sysctls":
			return fmt.Sprintf("  - name: net.ipv4.conf.all.rp_filter\n    value: \"%d\"", rng.IntN(3))
		case "routes":
			types := []string{"blackhole", "unreachable", "prohibit"}
			e := fmt.Sprintf("  - prefix: 10.%d.%d.0/24\n    type: %s", next>>8, next&0xff, types[rng.IntN(len(types))])
			if rng.IntN(4) == 0 {
				e += fmt.Sprintf("\n    metric: %d", rng.IntN(3))
			}
			return e
		default:
			return fmt.Sprintf("  - table: filter\n    chain: INPUT\n    name: r%d\n    priority: %d\n    spec: -p tcp --dport %d -j ACCEPT", next, rng.IntN(3), 1000+rng.IntN(5))
		}
	}
	type section struct {
		key     string
		entries []string
	}
	doc := []section{{"sysctls", []string{entry("sysctls")}}, {"routes", nil}, {"rules", nil}}
	for range 30 {
		doc[1].entries = append(doc[1].entries, entry("routes"))
		doc[2].entries = append(doc[2].entries, entry("rules"))
	}
	// faults make a version bad, or of another shape, once.
	faults := []func(s section) section{
		func(s section) section { // an entry twice
			s.entries = append(s.entries, s.entries[rng.IntN(len(s.entries))])
			return s
		},
		func(s section) section { // an entry's key twice
			i := rng.IntN(len(s.entries))
			s.entries = append(s.entries, strings.Replace(s.entries[i], "blackhole", "unreachable", 1)+"\n    metric: 9")
			return s
		},
		func(s section) section { // a broken value
			s.entries[rng.IntN(len(s.entries))] = "  - prefix: 10.250.0.0/24\n    type: blackhol"
			return s
		},
		func(s section) section { // an unknown field
			s.entries[rng.IntN(len(s.entries))] += "\n    colour: red"
			return s
		},
		func(s section) section { // a comment and a blank line within an entry
			i := rng.IntN(len(s.entries))
			s.entries[i] = strings.Replace(s.entries[i], "\n", "\n    # a comment\n\n", 1)
			return s
		},
		func(s section) section { // a field not under the first
			i := rng.IntN(len(s.entries))
			s.entries[i] = strings.Replace(s.entries[i], "\n    ", "\n     ", 1)
			return s
		},
		func(s section) section { // a flow mapping
			s.entries[rng.IntN(len(s.entries))] = "  - {prefix: 10.251.0.0/24, type: blackhole}"
			return s
		},
		func(s section) section { // more space after the dash
			i := rng.IntN(len(s.entries))
			s.entries[i] = strings.Replace(s.entries[i], "  - ", "  -   ", 1)
			return s
		},
		func(s section) section { // another indent
			i := rng.IntN(len(s.entries))
			s.entries[i] = " " + strings.ReplaceAll(s.entries[i], "\n", "\n ")
			return s
		},
	}
	render := func(doc []section, extra string) []byte {
		var b strings.Builder
		for _, s := range doc {
			b.WriteString(s.key + ":\n")
			for _, e := range s.entries {
				b.WriteString(e + "\n")
			}
		}
		b.WriteString(extra)
		return []byte(b.String())
	}
	c := newEntryCache([]string{"sysctls", "routes", "rules"}, decodeFileItems)
	good := 0
	for range 600 {
		key := []string{"routes", "rules"}[rng.IntN(2)]
		s := &doc[slices.IndexFunc(doc, func(s section) bool { return s.key == key })]
		switch op := rng.IntN(10); {
		case op < 4:
			s.entries[rng.IntN(len(s.entries))] = entry(s.key)
		case op < 6:
			s.entries = slices.Insert(s.entries, rng.IntN(len(s.entries)+1), entry(s.key))
		case op < 8 && len(s.entries) > 1:
			at := rng.IntN(len(s.entries))
			s.entries = slices.Delete(s.entries, at, at+1)
		case op == 8:
			i, j := rng.IntN(len(s.entries)), rng.IntN(len(s.entries))
			s.entries[i], s.entries[j] = s.entries[j], s.entries[i]
		default:
			i, j := rng.IntN(len(doc)), rng.IntN(len(doc))
			doc[i], doc[j] = doc[j], doc[i]
		}
		version, extra := doc, ""
		switch f := rng.IntN(len(faults) + 12); {
		case f < len(faults):
			version = slices.Clone(doc)
			i := slices.IndexFunc(version, func(s section) bool { return s.key == "routes" })
			if f == 3 || f == 4 || rng.IntN(2) == 0 {
				version[i] = faults[f](section{version[i].key, slices.Clone(version[i].entries)})
			} else {
				i = slices.IndexFunc(version, func(s section) bool { return s.key == "rules" })
				version[i] = faults[f](section{version[i].key, slices.Clone(version[i].entries)})
			}
		case f == len(faults):
			extra = "routes:\n  - prefix: 10.252.0.0/24\n    type: blackhole\n"
		case f == len(faults)+1:
			extra = "colours:\n  - red: 1\n"
		case f == len(faults)+2:
			extra = "# the end\n\n"
		}
		if err := sameDecode(t, c, render(version, extra)); err == nil {
			good++
		} else if testing.Verbose() {
			t.Log(err)
		}
	}
	t.Logf("%d versions good, %d decoded from the cache", good, c.served)
	if good < 300 || c.served < good/2 {
		t.Errorf("%d of the versions were good, %d decoded from the cache: the model tests too little", good, c.served)
	}
}

// TestEntryCacheBrokenLine: a version of 50,000 routes and 10,000 rules
// with one broken line, after a good one, is rejected whole with the
// line's number, as the whole file's decode rejects it.
func TestEntryCacheBrokenLine(t *testing.T) {
	data := restartDesired(50_000, 10_000)
	c := newEntryCache(fileKeyList(), decodeFileItems)
	if _, err := c.decode("desired.yaml", data); err != nil {
		t.Fatal(err)
	}
	_, line := findLine(t, data, "prefix: 10.1.7.0/24")
	bad := bytes.Replace(data, []byte("prefix: 10.1.7.0/24\n    type: blackhole\n"), []byte("prefix: 10.1.7.0/24\n    type: blackhol\n"), 1)
	items, err := c.decode("desired.yaml", bad)
	if want := fmt.Sprintf("line %d: routes[263]", line); err == nil || !strings.Contains(err.Error(), want) || items != nil {
		t.Fatalf("decode of a broken line: %d items, error %v; want none and an error naming %q", len(items), err, want)
	}
	sameDecode(t, c, bad)
	// And the good version after it still decodes from the cache.
	served := c.served
	sameDecode(t, c, data)
	if c.served != served+1 {
		t.Error("the good version after the broken one was not decoded from the cache")
	}
}

// BenchmarkDecodeEdit decodes one-route edits of a desired file of 50,000
// routes and 10,000 rules, as the agent does after each rename into
// place: whole, and with the cache of the version before.
func BenchmarkDecodeEdit(b *testing.B) {
	data := restartDesired(50_000, 10_000)
	versions := [][]byte{data}
	for i := range 16 {
		before, after := editPrefixes(i)
		data = bytes.Replace(data, []byte("prefix: "+before.String()+"\n"), []byte("prefix: "+after.String()+"\n"), 1)
		versions = append(versions, data)
	}
	b.Run("whole", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, err := decodeFileItems("desired.yaml", versions[i%len(versions)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("cached", func(b *testing.B) {
		c := newEntryCache(fileKeyList(), decodeFileItems)
		if _, err := c.decode("desired.yaml", versions[0]); err != nil {
			b.Fatal(err)
		}
		i := 1
		for b.Loop() {
			if _, err := c.decode("desired.yaml", versions[i%len(versions)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

// FuzzEntryCache decodes a version and then another with one cache: the
// second must decode as the whole file does (items or error).
func FuzzEntryCache(f *testing.F) {
	base := "sysctls:\n  - name: net.ipv4.ip_forward\n    value: \"1\"\nroutes:\n  - prefix: 10.0.0.0/24\n    type: blackhole\n  - prefix: 10.0.1.0/24\n    type: unreachable\nrules:\n  - table: filter\n    chain: INPUT\n    name: a\n    priority: 1\n    spec: -p tcp --dport 1 -j ACCEPT\n"
	f.Add(base, strings.Replace(base, "10.0.1.0", "10.0.2.0", 1))
	f.Add(base, strings.Replace(base, "type: unreachable", "type: unreachable\n    # note\n\n    metric: 3", 1))
	f.Add(base, strings.Replace(base, "  - prefix: 10.0.1.0/24\n    type: unreachable\n", "  - prefix: 10.0.0.0/24\n    type: blackhole\n", 1))
	f.Add(base, strings.Replace(base, "rules:", "routes:", 1))
	f.Add(base, strings.Replace(base, "  - prefix: 10.0.1.0/24", "  - {prefix: 10.0.1.0/24}", 1))
	f.Add(base, strings.Replace(base, "    type: unreachable", "      type: unreachable", 1))
	f.Fuzz(func(t *testing.T, first, second string) {
		c := newEntryCache(fileKeyList(), decodeFileItems)
		sameDecode(t, c, []byte(first))
		sameDecode(t, c, []byte(second))
		sameDecode(t, c, []byte(first))
	})
}

// TestEntryCacheShrink: a file of 20,000 routes edited down to 10 (decoded
// from the cache) leaves the cache holding what 10 entries cost, not the
// file it was filled from; and the next edit still decodes from it.
func TestEntryCacheShrink(t *testing.T) {
	big := restartDesired(20_000, 0)
	small := restartDesired(10, 0)
	l0 := liveHeap()
	alone := newEntryCache(fileKeyList(), decodeFileItems)
	sameDecode(t, alone, small)
	l1 := liveHeap()
	c := newEntryCache(fileKeyList(), decodeFileItems)
	sameDecode(t, c, big)
	sameDecode(t, c, small)
	if c.served != 1 {
		t.Fatalf("the version of 10 routes was not decoded from the cache (%d from it)", c.served)
	}
	l2 := liveHeap()
	tenOnly, afterShrink := int64(l1-l0), int64(l2-l1)
	t.Logf("10 routes: %d KB; 10 routes after 20,000: %d KB", tenOnly>>10, afterShrink>>10)
	if afterShrink-tenOnly > 100<<10 {
		t.Fatalf("the cache kept %d KB after the file shrank from 20,000 routes to 10", (afterShrink-tenOnly)>>10)
	}
	edited := bytes.Replace(small, []byte("prefix: 10.0.3.0/24\n"), []byte("prefix: 10.200.3.0/24\n"), 1)
	if bytes.Equal(edited, small) {
		t.Fatal("no route 10.0.3.0/24 to edit")
	}
	sameDecode(t, c, edited)
	if c.served != 2 {
		t.Error("the edit after the shrink was not decoded from the cache")
	}
	runtime.KeepAlive(alone)
	runtime.KeepAlive(big)
	runtime.KeepAlive(c)
}

// liveHeap is memtest.LiveHeap.
var liveHeap = memtest.LiveHeap

// TestEntryCacheFillInBackground: the cache of a first version is filled
// after its decode returned; the next version, decoded at once, waits for
// the fill and is decoded from it, with the whole decode's result.
func TestEntryCacheFillInBackground(t *testing.T) {
	first := restartDesired(5_000, 500)
	edited := bytes.Replace(first, []byte("prefix: 10.0.3.0/24\n"), []byte("prefix: 10.200.3.0/24\n"), 1)
	if bytes.Equal(edited, first) {
		t.Fatal("no route 10.0.3.0/24 to edit")
	}
	for range 20 {
		c := newEntryCache(fileKeyList(), decodeFileItems)
		if _, err := c.decode("desired.yaml", first); err != nil {
			t.Fatal(err)
		}
		got, err := c.decode("desired.yaml", edited) // no wait in between
		if err != nil {
			t.Fatal(err)
		}
		if c.served != 1 {
			t.Fatalf("the edit right after the first version was not decoded from the cache (%d from it)", c.served)
		}
		want, _ := decodeFileItems("desired.yaml", edited)
		if !sameItems(got, want) {
			t.Fatal("the edit decoded from the cache differs from its whole decode")
		}
	}
}

// With idle set, a first version's fill waits for it: nothing is filled
// while the agent starts; an edit before idle closes fills the cache
// first and is decoded from it.
func TestEntryCacheFillWaitsForIdle(t *testing.T) {
	first := restartDesired(500, 50)
	edited := bytes.Replace(first, []byte("prefix: 10.0.3.0/24\n"), []byte("prefix: 10.200.3.0/24\n"), 1)
	synctest.Test(t, func(t *testing.T) {
		idle := make(chan struct{})
		c := newEntryCache(fileKeyList(), decodeFileItems)
		c.idle = idle
		if _, err := c.decode("desired.yaml", first); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if fillDone(c) {
			t.Fatal("the first version's cache was filled before idle closed")
		}
		got, err := c.decode("desired.yaml", edited) // before idle: fills first
		if err != nil {
			t.Fatal(err)
		}
		if c.served != 1 {
			t.Fatalf("the edit was not decoded from the cache (%d from it)", c.served)
		}
		want, _ := decodeFileItems("desired.yaml", edited)
		if !sameItems(got, want) {
			t.Fatal("the edit decoded from the cache differs from its whole decode")
		}

		// A second cache, whose idle closes: filled then.
		idle2 := make(chan struct{})
		c2 := newEntryCache(fileKeyList(), decodeFileItems)
		c2.idle = idle2
		if _, err := c2.decode("desired.yaml", first); err != nil {
			t.Fatal(err)
		}
		close(idle2)
		synctest.Wait()
		if !fillDone(c2) {
			t.Fatal("the first version's cache was not filled once idle closed")
		}
		close(idle)
	})
}

// fillDone tells whether c's first fill has ended (without waiting for
// it, nor making it start).
func fillDone(c *entryCache[fileObject]) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.filling == nil || c.filling.Done()
}
