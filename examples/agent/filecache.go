package main

import (
	"bytes"
	"slices"
	"strings"
	"sync"

	"github.com/steadystate/steadystate/internal/later"
	"github.com/steadystate/steadystate/internal/shrink"
	"github.com/steadystate/steadystate/reflector"
)

// An edit of a large desired file changes a line or two: decoding and
// validating its 60,000 entries again for it took a quarter of a second.
// entryCache decodes only the entries it has not seen: it splits the file
// into its top-level keys and their entries by lines (the shape of
// parseBlockYAML), looks each entry's text up among the entries of the
// last version it decoded, and decodes just the others, each alone (a
// file of one key and that entry). The result is the decode's result for
// the whole file, by construction:
//
//   - an entry of the block shape decodes, validates and encodes the same
//     wherever it stands in the file (its line numbers are only in its
//     errors), so a text seen before has the item it had;
//   - the items come in the order the whole file's decode gives them:
//     the keys in the order of keys, each key's entries in file order;
//   - what depends on more than one entry is the duplicates check:
//     the cached entries (one good version's) have distinct names, a
//     text twice is a duplicate, and a new entry's name is checked against
//     the others;
//   - anything else (a file not of the shape, an unknown or repeated key,
//     a new entry that does not decode alone, a duplicate, many new
//     entries) goes to the whole file's decode, which also gives every
//     error its line and place. A bad file is never taken from the cache.
//
// A whole decode that succeeds fills the cache with its entries (a first
// version, or one that changed much). The cache holds the entries of the
// last version it took, no more.
type entryCache[V any] struct {
	// full decodes and validates a whole file (decodeFileItems).
	full func(path string, data []byte) ([]reflector.Item[V], error)
	// keys are the file's top-level keys, in the order full gives their
	// items.
	keys []string
	// counts are the entries of each section in the last version split:
	// the next split's capacities (an edit's split grew each section by
	// append, 9 MB allocated for 1.6 MB of entries at 60,000).
	counts []int
	// idle, if set, closes once the agent is ready: a first version's
	// fill waits for it (or for the next version), so as not to compete
	// with the start.
	idle <-chan struct{}
	// prefetch, if set, is the first version's decode, begun before the
	// hive was built (see desiredPrefetch).
	prefetch *prefetch[V]

	mu sync.Mutex
	// filling, if not nil, is the fill of a first version: it runs in
	// the background once idle closes (see decode), and the cache is its
	// until it is done.
	filling *later.Result[struct{}]
	gen     uint64                                // the decode in progress
	entries map[string]map[string]*cachedEntry[V] // by top-level key, by entry text
	names   map[nameKey]*cachedEntry[V]           // the same entries by table and name, once a version has new ones
	size    int                                   // how many entries
	peak    int                                   // the most entries since the last fill or compact
	served  int                                   // versions decoded from the cache (for tests)
}

// cachedEntry is an entry's item and the last decode that saw it.
type cachedEntry[V any] struct {
	item reflector.Item[V]
	seen uint64
}

type nameKey struct{ table, name string }

// maxNewEntries is the most entries a version may add or change (beyond
// an eighth of the file) to be decoded entry by entry; more go to the
// whole file's decode, which is faster for many.
const maxNewEntries = 256

func newEntryCache[V any](keys []string, full func(path string, data []byte) ([]reflector.Item[V], error)) *entryCache[V] {
	return &entryCache[V]{full: full, keys: keys}
}

// decode is the file source's Decode: full's result for data.
//
// With nothing cached (the first version), the cache is filled in the
// background, after the result is returned, once the agent is ready (idle)
// or the next version comes: a start needs the items, not the cache,
// which only the next version reads (it waits for the fill). At 60,000
// entries, splitting the file and filling took 35 ms and 20 MB of
// allocations, which competed with the start for its two cores.
func (c *entryCache[V]) decode(path string, data []byte) ([]reflector.Item[V], error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waitFill()
	if c.entries == nil {
		items, err, ok := c.prefetch.take(path, data)
		if !ok {
			items, err = c.full(path, data)
		}
		if err == nil {
			own := slices.Clone(items) // the caller's are the caller's
			c.filling = later.Start(c.idle, func() struct{} {
				if sections, ok := splitEntries(data, c.keys, nil); ok {
					c.counts = sectionCounts(sections)
					c.fill(data, sections, own)
				}
				return struct{}{}
			})
		}
		return items, err
	}
	sections, ok := splitEntries(data, c.keys, c.counts)
	if ok {
		c.counts = sectionCounts(sections)
	}
	if !ok {
		return c.full(path, data)
	}
	if items, ok := c.fromCache(path, sections); ok {
		c.served++
		return items, nil
	}
	items, err := c.full(path, data)
	if err == nil {
		c.fill(data, sections, items)
	}
	return items, err
}

// waitFill waits for the fill under way in the background, if any. The
// cache's fields are the fill's until it is done: c.mu held, every use of
// them comes after waitFill.
func (c *entryCache[V]) waitFill() {
	if c.filling != nil {
		c.filling.Wait()
		c.filling = nil
	}
}

// settle waits for the fill under way, if any (for tests).
func (c *entryCache[V]) settle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waitFill()
}

// fromCache decodes sections from the cache and the entries it lacks; ok
// is false when the whole file must be decoded.
func (c *entryCache[V]) fromCache(path string, sections [][]entryText) (items []reflector.Item[V], ok bool) {
	if c.entries == nil {
		return nil, false
	}
	total := 0
	for _, s := range sections {
		total += len(s)
	}
	c.gen++
	type fresh struct {
		section int
		at      int // index into items
		text    []byte
		item    reflector.Item[V]
	}
	var news []fresh
	items = make([]reflector.Item[V], 0, total)
	for i, s := range sections {
		known := c.entries[c.keys[i]]
		for _, t := range s {
			e, hit := known[string(t.b)]
			switch {
			case !hit:
				if len(news) >= max(maxNewEntries, total/8) {
					return nil, false
				}
				news = append(news, fresh{section: i, at: len(items), text: t.b})
				items = append(items, reflector.Item[V]{})
			case e.seen == c.gen:
				return nil, false // the same entry twice: a duplicate
			default:
				e.seen = c.gen
				items = append(items, e.item)
			}
		}
	}
	// The new entries, each alone; a name must be new, or be that of a
	// cached entry this version no longer has.
	if len(news) > 0 && c.names == nil {
		c.names = make(map[nameKey]*cachedEntry[V], c.size)
		for _, known := range c.entries {
			for _, e := range known {
				c.names[nameKey{e.item.Table, e.item.Key}] = e
			}
		}
	}
	seen := make(map[nameKey]bool, len(news))
	for i := range news {
		n := &news[i]
		if !entryShape(n.text) {
			return nil, false
		}
		one := append(append([]byte(c.keys[n.section]+":\n"), n.text...), '\n')
		got, err := c.full(path, one)
		if err != nil || len(got) != 1 {
			return nil, false
		}
		k := nameKey{got[0].Table, got[0].Key}
		if e, ok := c.names[k]; seen[k] || ok && e.seen == c.gen {
			return nil, false
		}
		seen[k] = true
		n.item = got[0]
		items[n.at] = got[0]
	}
	// Take the version: forget the entries it no longer has, add its new
	// ones.
	if kept := total - len(news); kept < c.size {
		for _, known := range c.entries {
			for text, e := range known {
				if e.seen != c.gen {
					delete(known, text)
					if c.names != nil {
						delete(c.names, nameKey{e.item.Table, e.item.Key})
					}
					c.size--
				}
			}
		}
	}
	for _, n := range news {
		e := &cachedEntry[V]{item: n.item, seen: c.gen}
		c.entries[c.keys[n.section]][string(n.text)] = e
		if c.names != nil {
			c.names[nameKey{n.item.Table, n.item.Key}] = e
		}
		c.size++
	}
	c.peak = max(c.peak, c.size)
	if c.peak > shrink.Above && c.size < c.peak/4 {
		c.compact()
	}
	return items, true
}

// compact makes the cache again at its size, once it holds less than a
// quarter of the most it held: its maps keep their room after deletes,
// and the entries of a fill are pieces of one copy of the file and of one
// slab, which a few entries left would hold whole. (A file of 20,000
// routes edited down to 10 kept 7 MB.) Texts and entries are copied.
func (c *entryCache[V]) compact() {
	names := c.names != nil
	if names {
		c.names = make(map[nameKey]*cachedEntry[V], c.size)
	}
	for key, known := range c.entries {
		fresh := make(map[string]*cachedEntry[V], len(known))
		for text, e := range known {
			e := &cachedEntry[V]{item: e.item, seen: e.seen}
			fresh[strings.Clone(text)] = e
			if names {
				c.names[nameKey{e.item.Table, e.item.Key}] = e
			}
		}
		c.entries[key] = fresh
	}
	c.peak = c.size
}

// fill makes the cache the entries of sections (of data), whose whole
// decode gave items (in the same order). The entries' texts are kept as
// pieces of one copy of data, their entries in one slice: a first version
// of 60,000 entries costs the map, not 120,000 allocations. (The index by
// name waits for the first version with new entries.)
func (c *entryCache[V]) fill(data []byte, sections [][]entryText, items []reflector.Item[V]) {
	total := 0
	for _, s := range sections {
		total += len(s)
	}
	c.entries, c.names, c.size = nil, nil, 0
	if total != len(items) {
		return // not one item per entry: decode whole files
	}
	for _, s := range sections {
		for _, t := range s {
			if !entryShape(t.b) {
				return // not of the shape: decode whole files
			}
		}
	}
	c.gen++
	all := string(data)
	slab := make([]cachedEntry[V], total)
	c.entries = make(map[string]map[string]*cachedEntry[V], len(c.keys))
	at := 0
	for i, s := range sections {
		known := make(map[string]*cachedEntry[V], len(s))
		c.entries[c.keys[i]] = known
		for _, t := range s {
			var text string
			if t.off >= 0 {
				text = all[t.off : t.off+len(t.b)]
			} else {
				text = string(t.b)
			}
			slab[at] = cachedEntry[V]{item: items[at], seen: c.gen}
			known[text] = &slab[at]
			at++
		}
	}
	c.size, c.peak = total, total
}

// entryText is an entry's text, and where it starts in the file (-1 when
// it is not a piece of the file: blank or comment lines were dropped).
// sectionCounts returns the number of entries of each section.
func sectionCounts(sections [][]entryText) []int {
	counts := make([]int, len(sections))
	for i, s := range sections {
		counts[i] = len(s)
	}
	return counts
}

type entryText struct {
	b   []byte
	off int
}

// splitEntries splits a file into the entries of each of keys (in that
// order), by the line structure of parseBlockYAML's shape: top-level keys
// alone on their lines, each followed by its entries at one indent. Each
// entry's text is its lines, from its "- " to its last field, without the
// newline that ends it (and without the blank and comment lines within
// it). The lines within an entry are not checked here (see entryShape).
// ok is false when data is not printable ASCII, not of that structure,
// or has a top-level key that is not one of keys, twice, or without
// entries; the caller then decodes the whole file.
func splitEntries(data []byte, keys []string, counts []int) (sections [][]entryText, ok bool) {
	for _, c := range data {
		if (c < 0x20 || c > 0x7e) && c != '\n' {
			return nil, false
		}
	}
	sections = make([][]entryText, len(keys))
	cur, dash := -1, -1
	start, end := -1, -1 // the current entry's first byte and the end of its last line
	gap, gaps := false, false
	flush := func() {
		if start < 0 {
			return
		}
		t := entryText{b: data[start:end], off: start}
		if gaps {
			t = entryText{b: dropGaps(t.b), off: -1}
		}
		sections[cur] = append(sections[cur], t)
		start, gap, gaps = -1, false, false
	}
	for off := 0; off < len(data); {
		n := bytes.IndexByte(data[off:], '\n')
		next := off + n + 1
		if n < 0 {
			n, next = len(data)-off, len(data)
		}
		l := data[off : off+n]
		indent, rest := splitIndent(l)
		switch {
		case len(rest) == 0 || rest[0] == '#':
			gap = start >= 0
		case indent == 0 && rest[0] != '-':
			flush()
			key, after, ok := splitKey(rest)
			if !ok || len(bytes.TrimRight(after, " ")) > 0 || cur >= 0 && len(sections[cur]) == 0 {
				return nil, false
			}
			i := slices.Index(keys, key)
			if i < 0 || sections[i] != nil {
				return nil, false
			}
			cur, dash = i, -1
			sections[i] = []entryText{}
			if i < len(counts) {
				sections[i] = make([]entryText, 0, counts[i]+counts[i]/16+8)
			}
		case rest[0] == '-':
			if cur < 0 || dash >= 0 && indent != dash {
				return nil, false
			}
			flush()
			dash = indent
			start, end = off, off+n
		default:
			if start < 0 {
				return nil, false
			}
			gaps = gaps || gap
			end = off + n
		}
		off = next
	}
	flush()
	if cur < 0 || len(sections[cur]) == 0 {
		return nil, false
	}
	return sections, true
}

// dropGaps returns text without its blank and comment lines.
func dropGaps(text []byte) []byte {
	var out []byte
	for l := range bytes.SplitSeq(text, []byte("\n")) {
		if t := bytes.TrimLeft(l, " "); len(t) == 0 || t[0] == '#' {
			continue
		}
		if out != nil {
			out = append(out, '\n')
		}
		out = append(out, l...)
	}
	return out
}

// entryShape reports whether text, an entry of splitEntries, is of
// parseBlockYAML's shape line by line: "- FIELD: SCALAR", then
// "FIELD: SCALAR" lines under its first field.
func entryShape(text []byte) bool {
	field := -1
	for l := range bytes.SplitSeq(text, []byte("\n")) {
		indent, rest := splitIndent(l)
		if field < 0 {
			if len(rest) < 2 || rest[0] != '-' || rest[1] != ' ' {
				return false
			}
			f, ok := itemField(l, indent)
			if !ok {
				return false
			}
			field = f
		} else if indent != field || len(rest) > 0 && rest[0] == '-' {
			return false
		}
		if _, _, _, _, ok := splitField(l, field); !ok {
			return false
		}
	}
	return field >= 0
}
