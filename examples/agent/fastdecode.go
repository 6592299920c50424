package main

import (
	"encoding"
	"reflect"
	"sync"

	"go.yaml.in/yaml/v3"
)

// A desired file of the block shape (see fastyaml.go) is decoded straight
// into its objects: the nodes parseBlockYAML makes for 60,000 entries are
// 360,000 of them, 60 MB allocated per start only to be read once by the
// library's decoder, which is slower still. decodeBlockDirect walks the
// file with the same walker and sets each field as the library's decode of
// the entry's mapping would; where that is in any doubt (a field unknown,
// or given twice, a null, a number not plainly decimal, a value that does
// not decode), it declines the whole file, and decodeYAML takes the nodes'
// path, which gives the same objects or names each error.
// FuzzDecodeBlockDirect holds it to that path.

// decodeBlockDirect decodes data into f, or reports false (f then
// unchanged) when data is not of the block shape or an entry is in doubt.
func decodeBlockDirect(data []byte, f *desiredFile) bool {
	d := &directDecoder{}
	if !walkBlockYAML(data, d) {
		return false
	}
	for _, l := range d.lists {
		f.objects[l.kind.fileKey()], f.lines[l.kind.fileKey()] = l.list.objects()
	}
	return true
}

// directDecoder is the blockVisitor that makes the objects.
type directDecoder struct {
	lists []directKey
	cur   directList // the current key's
}

type directKey struct {
	kind agentKind
	list directList
}

func (d *directDecoder) key(key []byte, _ int) bool {
	k, ok := kindByFileKey(string(key))
	if !ok {
		return false // unknown: the nodes' path says so
	}
	for _, l := range d.lists {
		if l.kind.fileKey() == k.fileKey() {
			return false // given again
		}
	}
	d.cur = k.directList()
	d.lists = append(d.lists, directKey{k, d.cur})
	return true
}

func (d *directDecoder) item(n, _, _ int, _ bool) bool {
	d.cur.begin(n)
	return true
}

func (d *directDecoder) field(key, value []byte, style yaml.Style, _, _, _ int) bool {
	return d.cur.set(key, value, style)
}

// directList makes the objects of one kind.
type directList interface {
	// begin starts an entry on line n.
	begin(n int)
	// set sets a field of the current entry; false when in doubt.
	set(key, value []byte, style yaml.Style) bool
	// objects returns the entries and their lines, as decodeList does.
	objects() ([]any, []int)
}

// directListOf makes *T objects.
type directListOf[T any] struct {
	fields *entryFields
	objs   []*T
	lines  []int
	cur    reflect.Value // *objs[len-1]
	given  uint64        // the current entry's fields set, by bit
}

func newDirectList[T any]() directList {
	return &directListOf[T]{fields: fieldsOf(reflect.TypeFor[T]())}
}

func (l *directListOf[T]) begin(n int) {
	obj := new(T)
	l.objs, l.lines = append(l.objs, obj), append(l.lines, n)
	l.cur, l.given = reflect.ValueOf(obj).Elem(), 0
}

func (l *directListOf[T]) set(key, value []byte, style yaml.Style) bool {
	fi, ok := l.fields.byName[string(key)]
	if !ok || l.given&(1<<fi.bit) != 0 {
		return false // unknown, or given twice
	}
	l.given |= 1 << fi.bit
	if style == 0 && isNull(value) {
		return false
	}
	v := l.cur.Field(fi.index)
	switch fi.kind {
	case fieldText:
		return v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText(value) == nil
	case fieldString:
		v.SetString(string(value))
		return true
	case fieldInt:
		i, ok := plainDecimal(value)
		if !ok || style != 0 || v.OverflowInt(i) {
			return false
		}
		v.SetInt(i)
		return true
	}
	return false
}

func (l *directListOf[T]) objects() ([]any, []int) { return anys(l.objs), l.lines }

// entryFields are the fields of a kind's type that a desired entry may
// set (decodeList's: by yaml name, without status), and how. A type or a
// field that unmarshals its own YAML (yaml.Unmarshaler) is left to the
// library.
type entryFields struct {
	byName map[string]entryField
}

type entryField struct {
	index int // in the struct
	bit   int // in directListOf.given
	kind  fieldKind
}

type fieldKind int

const (
	fieldOther  fieldKind = iota // declined: the nodes' path decodes it
	fieldString                  // a string: any scalar's text but a null
	fieldInt                     // an int: a plain decimal
	fieldText                    // an encoding.TextUnmarshaler: any scalar's text but a null
)

var (
	fieldsMu    sync.Mutex
	fieldsCache = map[reflect.Type]*entryFields{}

	yamlUnmarshaler = reflect.TypeFor[yaml.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// fieldsOf returns the entryFields of struct type rt, made once.
func fieldsOf(rt reflect.Type) *entryFields {
	fieldsMu.Lock()
	defer fieldsMu.Unlock()
	if fs, ok := fieldsCache[rt]; ok {
		return fs
	}
	fs := &entryFields{byName: map[string]entryField{}}
	if reflect.PointerTo(rt).Implements(yamlUnmarshaler) {
		fieldsCache[rt] = fs // decodes itself: every field declined
		return fs
	}
	for i := range rt.NumField() {
		sf := rt.Field(i)
		name, ok := yamlName(sf)
		if !ok || len(fs.byName) == 64 {
			continue
		}
		kind := fieldOther
		switch {
		case reflect.PointerTo(sf.Type).Implements(yamlUnmarshaler):
			// The library calls it, before anything else.
		case reflect.PointerTo(sf.Type).Implements(textUnmarshaler):
			kind = fieldText
		case sf.Type.Kind() == reflect.String:
			kind = fieldString
		case sf.Type.Kind() == reflect.Int:
			kind = fieldInt
		}
		if kind != fieldOther {
			fs.byName[name] = entryField{index: i, bit: len(fs.byName), kind: kind}
		}
	}
	fieldsCache[rt] = fs
	return fs
}

// isNull tells whether a plain scalar is one of the library's nulls.
func isNull(b []byte) bool {
	switch string(b) {
	case "~", "null", "Null", "NULL":
		return true
	}
	return false
}

// plainDecimal reads a plain scalar that the library reads as a decimal
// int: an optional '-', then "0" or a digit 1-9 and at most 17 more.
func plainDecimal(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 || b[0] == '0' && (len(b) > 1 || neg) {
		return 0, false
	}
	var i int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		i = i*10 + int64(c-'0')
	}
	if neg {
		i = -i
	}
	return i, true
}
