package main

import (
	"bytes"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/steadystate/steadystate/reflector"
)

// A start decodes and validates the whole desired file before anything
// else can happen, on one core while the other is idle: 45-55 ms of a
// 60,000-entry start's critical path. decodeSplit does it in two halves,
// one on each core, when the file is of the block shape (fastyaml.go) and
// large. It takes the result only when both halves are good; anything else
// (a half the direct decode declines, a kind in both halves, an error, a
// duplicate) goes to the whole file's decode, which gives the same objects
// or every error with its line.
//
// The halves meet at an item line of the key (say routes) whose sequence
// holds the middle of the file: the item on the middle's line, or the
// first after it. The
// second half is that key's line then the rest of the file from the item:
// its walk (walkBlockYAML) is the whole file's from the item on, as the
// walk carries nothing from one item to the next but the key, its dash's
// column (the split item's is checked against the key's first item's) and
// whether the key had items. So the halves' objects, one after the other,
// are the whole file's, and so are their names; each half checks its own
// duplicates, and the key split between them is checked across.

// splitAbove is the smallest file decoded in two halves: below it, the
// second goroutine costs more than the half it takes. (A variable for
// tests.)
var splitAbove = 256 << 10

// decodeSplit is decodeFileItems in two halves; ok is false when the
// whole file must be decoded (see above).
func decodeSplit(path string, data []byte) (items []reflector.Item[fileObject], ok bool) {
	if len(data) < splitAbove || runtime.GOMAXPROCS(0) < 2 || strings.EqualFold(filepath.Ext(path), ".json") {
		return nil, false
	}
	key, at, ok := splitPoint(data)
	if !ok {
		return nil, false
	}
	second := make([]byte, 0, len(key)+2+len(data)-at)
	second = append(append(append(second, key...), ":\n"...), data[at:]...)
	var b decodedHalf
	done := make(chan struct{})
	go func() {
		defer close(done)
		b = decodeHalf(second)
	}()
	a := decodeHalf(data[:at])
	<-done
	if !a.ok || !b.ok {
		return nil, false
	}
	n := 0
	for _, k := range kinds {
		n += len(a.objs[k.fileKey()]) + len(b.objs[k.fileKey()])
	}
	items = make([]reflector.Item[fileObject], 0, n)
	for _, k := range kinds {
		fk := k.fileKey()
		_, inA := a.objs[fk]
		_, inB := b.objs[fk]
		if inA && inB && fk != key {
			return nil, false // given twice: the whole decode says where
		}
		if inA && inB && !distinct(a.names[fk], b.names[fk]) {
			return nil, false // a duplicate across the halves
		}
		for _, h := range []*decodedHalf{&a, &b} {
			names := h.names[fk]
			for i, obj := range h.objs[fk] {
				items = append(items, reflector.Item[fileObject]{Table: k.tableName(), Key: names[i], Value: fileObject{obj}})
			}
		}
	}
	return items, true
}

// decodedHalf is a half of a file, decoded and validated: each kind's
// objects and their names, by the kind's file key.
type decodedHalf struct {
	objs  map[string][]any
	names map[string][]string
	ok    bool
}

// decodeHalf decodes and validates a half; ok is false when the direct
// decode declines it or anything in it is bad.
func decodeHalf(data []byte) decodedHalf {
	f := desiredFile{objects: map[string][]any{}, lines: map[string][]int{}}
	if !decodeBlockDirect(data, &f) {
		return decodedHalf{}
	}
	h := decodedHalf{objs: f.objects, names: make(map[string][]string, len(f.objects)), ok: true}
	for fk, objs := range f.objects {
		k, _ := kindByFileKey(fk)
		names, errs := k.validate(objs, f.lines[fk])
		if len(errs) > 0 {
			return decodedHalf{}
		}
		h.names[fk] = names
	}
	return h
}

// distinct reports whether no name is in both a and b.
func distinct(a, b []string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	in := make(map[string]struct{}, len(a))
	for _, n := range a {
		in[n] = struct{}{}
	}
	for _, n := range b {
		if _, dup := in[n]; dup {
			return false
		}
	}
	return true
}

// splitPoint finds where the halves meet: at, the start of the item line
// on the middle's line of data or the first after it, of key, the
// top-level key whose sequence holds the middle, with the dash in the
// column of key's first item. ok is false when there is no such line (the
// middle in the last item or on a key's line, a line not of the shape).
func splitPoint(data []byte) (key string, at int, ok bool) {
	// The key: the last top-level key line before the middle.
	mid := len(data) / 2
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
	// The first item line of key at or after the middle.
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
