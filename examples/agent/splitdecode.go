package main

import (
	"bytes"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/steadystate/steadystate/reflector"
)

// A start decodes and validates the whole desired file before anything
// else can happen: 45-55 ms of a 60,000-entry start's critical path on one
// core while the other was idle. A parted decode does it in parts that
// any goroutine may take, one after the other (work): two goroutines
// take a large file's parts (decodeSplit), and the prefetch of a start
// (prefetch.go) decodes its parts alone (under 2 MB) until the file
// source asks for the result, which then takes the parts left rather
// than wait. It
// is used when the file is of the block shape (fastyaml.go) and large,
// and its result taken only when every part is good; anything else (a
// part the direct decode declines, a kind in two parts not joined at a
// split of its own, an error, a duplicate) goes to the whole file's
// decode, which gives the same objects or every error with its line.
//
// Parts meet at an item line of the key (say routes) whose sequence
// holds the split's offset: the item on that offset's line, or the first
// after it. A part after the first is that key's line then the rest of
// its share of the file from the item: its walk (walkBlockYAML) is the
// whole file's from the item on, as the walk carries nothing from one
// item to the next but the key, its dash's column (the split item's is
// checked against the key's first item's) and whether the key had items.
// So the parts' objects, one after the other, are the whole file's, and so
// are their names; each part checks its own duplicates, and a key split
// between parts is checked across them.

// splitAbove is the smallest file decoded in parts: below it, a second
// goroutine costs more than the part it takes. (A variable for tests.)
var splitAbove = 256 << 10

// partBytes is about how much of a file a part of a parted decode
// holds, and maxParts how many parts it has at most.
const (
	partBytes = 128 << 10
	maxParts  = 8
)

// partedDecode is a decode of a file in parts (see above).
type partedDecode struct {
	data  []byte   // the whole file
	parts [][]byte // each part's text
	keys  []string // keys[i] is the key whose items part i > 0 begins in
	out   []decodedPart
	next  atomic.Int32   // the next part to take
	left  sync.WaitGroup // parts not decoded yet
}

// newPartedDecode splits data into up to n parts, or returns nil when it
// is not to be decoded in parts: small, JSON, one core, or no split
// point.
func newPartedDecode(path string, data []byte, n int) *partedDecode {
	if len(data) < splitAbove || runtime.GOMAXPROCS(0) < 2 || strings.EqualFold(filepath.Ext(path), ".json") {
		return nil
	}
	type split struct {
		key string
		at  int
	}
	var splits []split
	for i := 1; i < n; i++ {
		key, at, ok := splitPoint(data, len(data)*i/n)
		if ok && (len(splits) == 0 || at > splits[len(splits)-1].at) {
			splits = append(splits, split{key, at})
		}
	}
	if len(splits) == 0 {
		return nil
	}
	d := &partedDecode{data: data, keys: []string{""}, parts: [][]byte{data[:splits[0].at]}}
	for i, sp := range splits {
		end := len(data)
		if i+1 < len(splits) {
			end = splits[i+1].at
		}
		part := make([]byte, 0, len(sp.key)+2+end-sp.at)
		d.parts = append(d.parts, append(append(append(part, sp.key...), ":\n"...), data[sp.at:end]...))
		d.keys = append(d.keys, sp.key)
	}
	d.out = make([]decodedPart, len(d.parts))
	d.left.Add(len(d.parts))
	return d
}

// partsFor is how many parts a file of size bytes is decoded in.
func partsFor(size int) int { return min(max(size/partBytes, 2), maxParts) }

// work decodes parts no one has taken yet, until none is left.
func (d *partedDecode) work() {
	for {
		i := int(d.next.Add(1) - 1)
		if i >= len(d.parts) {
			return
		}
		d.out[i] = decodePart(d.parts[i])
		d.left.Done()
	}
}

// result waits for every part and returns the file's items; ok is false
// when the whole file must be decoded (see above).
func (d *partedDecode) result() (items []reflector.Item[fileObject], ok bool) {
	d.left.Wait()
	n := 0
	for _, h := range d.out {
		if !h.ok {
			return nil, false
		}
		for _, objs := range h.objs {
			n += len(objs)
		}
	}
	items = make([]reflector.Item[fileObject], 0, n)
	for _, k := range kinds {
		fk := k.fileKey()
		first, last := -1, -1
		for i, h := range d.out {
			if _, in := h.objs[fk]; in {
				if first < 0 {
					first = i
				}
				last = i
			}
		}
		if first < 0 {
			continue
		}
		for i := first + 1; i <= last; i++ {
			if d.keys[i] != fk {
				return nil, false // given twice: the whole decode says where
			}
		}
		if last > first && !distinctParts(d.out[first:last+1], fk) {
			return nil, false // a duplicate across the parts
		}
		for _, h := range d.out[first : last+1] {
			names := h.names[fk]
			for i, obj := range h.objs[fk] {
				items = append(items, reflector.Item[fileObject]{Table: k.tableName(), Key: names[i], Value: fileObject{obj}})
			}
		}
	}
	return items, true
}

// decodeSplit is decodeFileItems in parts, on two goroutines; ok is
// false when the whole file must be decoded (see above).
func decodeSplit(path string, data []byte) (items []reflector.Item[fileObject], ok bool) {
	d := newPartedDecode(path, data, partsFor(len(data)))
	if d == nil {
		return nil, false
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.work()
	}()
	d.work()
	<-done
	return d.result()
}

// decodedPart is a part of a file, decoded and validated: each kind's
// objects and their names, by the kind's file key.
type decodedPart struct {
	objs  map[string][]any
	names map[string][]string
	ok    bool
}

// decodePart decodes and validates a part; ok is false when the direct
// decode declines it or anything in it is bad.
func decodePart(data []byte) decodedPart {
	f := desiredFile{objects: map[string][]any{}, lines: map[string][]int{}}
	if !decodeBlockDirect(data, &f) {
		return decodedPart{}
	}
	h := decodedPart{objs: f.objects, names: make(map[string][]string, len(f.objects)), ok: true}
	for fk, objs := range f.objects {
		k, _ := kindByFileKey(fk)
		names, errs := k.validate(objs, f.lines[fk])
		if len(errs) > 0 {
			return decodedPart{}
		}
		h.names[fk] = names
	}
	return h
}

// distinctParts reports whether no name of kind fk is in two of parts
// (each part's own are distinct: validate checks them). The largest
// part's names are looked up, not entered.
func distinctParts(parts []decodedPart, fk string) bool {
	largest, total := 0, 0
	for i, h := range parts {
		total += len(h.names[fk])
		if len(h.names[fk]) > len(parts[largest].names[fk]) {
			largest = i
		}
	}
	in := make(map[string]struct{}, total-len(parts[largest].names[fk]))
	for i, h := range parts {
		if i == largest {
			continue
		}
		for _, n := range h.names[fk] {
			if _, dup := in[n]; dup {
				return false
			}
			in[n] = struct{}{}
		}
	}
	for _, n := range parts[largest].names[fk] {
		if _, dup := in[n]; dup {
			return false
		}
	}
	return true
}

// splitPoint finds where two parts meet near offset mid: at, the start of
// the item line on mid's line of data or the first after it, of key, the
// top-level key whose sequence holds mid, with the dash in the column of
// key's first item. ok is false when there is no such line (mid in the
// last item or on a key's line, a line not of the shape).
func splitPoint(data []byte, mid int) (key string, at int, ok bool) {
	// The key: the last top-level key line before mid.
	lineStart := func(off int) int { return bytes.LastIndexByte(data[:off], '\n') + 1 }
	keyAt := -1
	for off := lineStart(mid); off > 0; {
		start := lineStart(off - 1)
		if l := data[start : off-1]; len(l) > 0 && l[0] != ' ' && l[0] != '-' && l[0] != '#' {
			keyAt = start
			break
		}
		off = start
	}
	if keyAt < 0 && len(data) > 0 && data[0] != ' ' && data[0] != '-' && data[0] != '#' {
		keyAt = 0 // the first line
	}
	if keyAt < 0 {
		return "", 0, false
	}
	keyLine, _, _ := bytes.Cut(data[keyAt:], []byte("\n"))
	i := keyLen(keyLine)
	if i < 0 || len(bytes.TrimRight(keyLine[i+1:], " ")) > 0 {
		return "", 0, false
	}
	key = string(keyLine[:i])
	// The column of the key's first item.
	dash := -1
	for off := keyAt + len(keyLine) + 1; off < len(data) && dash < 0; {
		l, _, _ := bytes.Cut(data[off:], []byte("\n"))
		indent, rest := splitIndent(l)
		switch {
		case len(rest) == 0 || rest[0] == '#':
		case rest[0] == '-':
			dash = indent
		default:
			return "", 0, false
		}
		off += len(l) + 1
	}
	if dash < 0 {
		return "", 0, false
	}
	// The first item line of key at or after mid.
	for off := lineStart(mid); off < len(data); {
		l, _, _ := bytes.Cut(data[off:], []byte("\n"))
		indent, rest := splitIndent(l)
		switch {
		case len(rest) > 0 && indent == 0 && rest[0] != '-' && rest[0] != '#':
			return "", 0, false // the next key: no item of key is left
		case len(rest) > 0 && rest[0] == '-' && indent == dash && off > keyAt:
			return key, off, true
		}
		off += len(l) + 1
	}
	return "", 0, false
}
