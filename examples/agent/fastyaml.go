package main

import (
	"bytes"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A desired file is most often one shape: top-level keys, each a block
// sequence of block mappings of one-line scalars (the sample, and what
// tools write). parseBlockYAML reads that shape line by line, about ten
// times faster than the YAML library, into the nodes the library would
// make (kinds, tags, styles, values, lines and columns; not comments);
// on anything else, or any doubt, it declines and the library parses the
// file. FuzzParseBlockYAML holds it to the library.
//
// The shape, for each line:
//
//	blank, or a comment (spaces, then '#')
//	KEY:                      a top-level key, at column 1, alone
//	INDENT- FIELD: SCALAR     an item of the key's sequence (one indent per sequence)
//	INDENT  FIELD: SCALAR     another field of the item, under the first
//
// where KEY and FIELD are a letter then letters, digits or '_' (at most
// maxKey), and
// SCALAR is a plain scalar without '#', ": ", a leading indicator or a
// trailing ':', or a quoted one without escapes or its own quote. The
// file must be printable ASCII. Every top-level key has at least one
// item.

// blockVisitor takes the parts of a file of the shape above, in order,
// from walkBlockYAML; each returns false to stop the walk (the file is
// then declined).
type blockVisitor interface {
	// key is a top-level key, on line n.
	key(key []byte, n int) bool
	// item starts an item of the current key's sequence on line n, whose
	// dash is at column dash and its fields at column field (0-based);
	// first says it is the sequence's first.
	item(n, dash, field int, first bool) bool
	// field is a field of the current item, on line n: its key at column
	// col, its scalar's text (quotes dropped) and style at column vcol.
	field(key, value []byte, style yaml.Style, n, col, vcol int) bool
}

// walkBlockYAML walks data, a file of the shape above, through v, and
// reports whether data was of the shape (and v took all of it).
func walkBlockYAML(data []byte, v blockVisitor) bool {
	for _, c := range data {
		if (c < 0x20 || c > 0x7e) && c != '\n' {
			return false
		}
	}
	keys, items := 0, -1  // the top-level keys; the current key's items (-1 before the first key)
	dash, field := -1, -1 // columns (0-based) of the current sequence's dashes, of its item's fields
	inItem := false
	for n := 1; len(data) > 0; n++ {
		l := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			l, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		indent, rest := splitIndent(l)
		switch {
		case len(rest) == 0 || rest[0] == '#':
			// Blank, or a comment.
		case indent == 0 && rest[0] != '-':
			// A top-level key, alone on its line.
			i := keyLen(rest)
			if i < 0 || len(bytes.TrimRight(rest[i+1:], " ")) > 0 || items == 0 || !v.key(rest[:i], n) {
				return false
			}
			keys, items, dash, inItem = keys+1, 0, -1, false
		case rest[0] == '-':
			// An item of the current sequence: "- FIELD: SCALAR".
			if items < 0 || len(rest) < 2 || rest[1] != ' ' || dash >= 0 && indent != dash {
				return false
			}
			f, ok := itemField(l, indent)
			if !ok {
				return false
			}
			first := dash < 0
			dash, field, inItem = indent, f, true
			items++
			if !v.item(n, dash, field, first) || !walkField(v, l, n, field) {
				return false
			}
		default:
			// Another field of the current item, under its first.
			if !inItem || indent != field || !walkField(v, l, n, field) {
				return false
			}
		}
	}
	return keys > 0 && items > 0
}

// itemField returns the column of the first field of l, an item's line
// ("- FIELD: SCALAR", its dash at column indent).
func itemField(l []byte, indent int) (int, bool) {
	f := indent + 2
	for f < len(l) && l[f] == ' ' {
		f++
	}
	return f, f < len(l) && l[f] != '-' && l[f] != '#'
}

// walkField gives v the field "FIELD: SCALAR" that starts at column col
// of line l (number n).
func walkField(v blockVisitor, l []byte, n, col int) bool {
	key, value, style, vcol, ok := splitField(l, col)
	return ok && v.field(key, value, style, n, col, vcol)
}

// splitField splits the field "FIELD: SCALAR" that starts at column col
// of line l into its key and its scalar's text (quotes dropped), style
// and column, or reports false when it is not of the shape.
func splitField(l []byte, col int) (key, value []byte, style yaml.Style, vcol int, ok bool) {
	i := keyLen(l[col:])
	if i < 0 {
		return nil, nil, 0, 0, false
	}
	key, after := l[col:col+i], l[col+i+1:]
	if len(after) < 2 || after[0] != ' ' {
		return nil, nil, 0, 0, false
	}
	vcol = col + i + 2
	for vcol < len(l) && l[vcol] == ' ' {
		vcol++
	}
	value = bytes.TrimRight(l[vcol:], " ")
	if style, ok = scalarShape(value); !ok {
		return nil, nil, 0, 0, false
	}
	if style != 0 {
		value = value[1 : len(value)-1]
	}
	return key, value, style, vcol, true
}

// parseBlockYAML returns the document node of data as yaml.Unmarshal
// makes it, or ok false when data is not of the shape above.
func parseBlockYAML(data []byte) (doc *yaml.Node, ok bool) {
	b := &nodeBuilder{}
	b.top = b.a.node(yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"})
	if !walkBlockYAML(data, b) {
		return nil, false
	}
	return &yaml.Node{Kind: yaml.DocumentNode, Line: b.top.Line, Column: 1, Content: []*yaml.Node{b.top}}, true
}

// nodeBuilder is the blockVisitor that makes the library's nodes.
type nodeBuilder struct {
	a        nodeArena
	top      *yaml.Node
	seq, cur *yaml.Node // the current sequence and item
}

func (b *nodeBuilder) key(key []byte, n int) bool {
	if len(b.top.Content) == 0 {
		b.top.Line, b.top.Column = n, 1
	}
	b.seq = b.a.node(yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"})
	b.top.Content = append(b.top.Content, b.a.scalar(string(key), 0, n, 1), b.seq)
	return true
}

func (b *nodeBuilder) item(n, dash, field int, first bool) bool {
	if first {
		b.seq.Line, b.seq.Column = n, dash+1
	}
	b.cur = b.a.node(yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: n, Column: field + 1, Content: b.a.content()})
	b.seq.Content = append(b.seq.Content, b.cur)
	return true
}

func (b *nodeBuilder) field(key, value []byte, style yaml.Style, n, col, vcol int) bool {
	b.cur.Content = append(b.cur.Content, b.a.scalar(string(key), 0, n, col+1), b.a.scalar(string(value), style, n, vcol+1))
	return true
}

// maxKey is the longest KEY or FIELD of the shape.
const maxKey = 64

// splitKey splits "KEY:..." into KEY and what follows the colon.
func splitKey(b []byte) (key string, after []byte, ok bool) {
	i := keyLen(b)
	if i < 0 {
		return "", nil, false
	}
	return string(b[:i]), b[i+1:], true
}

// keyLen returns the length of the KEY of "KEY:...", or -1.
func keyLen(b []byte) int {
	i := 0
	for i < len(b) && (b[i] >= 'a' && b[i] <= 'z' || b[i] >= 'A' && b[i] <= 'Z' || i > 0 && (b[i] >= '0' && b[i] <= '9' || b[i] == '_')) {
		i++
	}
	// The library takes a key of more than 1024 characters for no key.
	if i == 0 || i > maxKey || i == len(b) || b[i] != ':' {
		return -1
	}
	return i
}

// scalarShape tells whether b is a one-line scalar of the shape, and its
// style (0 for plain), without making its value.
func scalarShape(b []byte) (style yaml.Style, ok bool) {
	if len(b) == 0 {
		return 0, false // null
	}
	switch q := b[0]; q {
	case '"', '\'':
		if len(b) < 2 || b[len(b)-1] != q || bytes.IndexByte(b[1:len(b)-1], q) >= 0 || bytes.IndexByte(b, '\\') >= 0 {
			return 0, false
		}
		if q == '\'' {
			return yaml.SingleQuotedStyle, true
		}
		return yaml.DoubleQuotedStyle, true
	}
	if bytes.IndexByte(b, '#') >= 0 || bytes.Contains(b, []byte(": ")) || b[len(b)-1] == ':' || string(b) == "<<" {
		return 0, false
	}
	switch c := b[0]; c {
	case '?', ':', ',', '[', ']', '{', '}', '&', '*', '!', '|', '>', '%', '@', '`':
		return 0, false
	case '-':
		if len(b) == 1 || b[1] == ' ' || bytes.HasPrefix(b, []byte("---")) {
			return 0, false
		}
	}
	return 0, true
}

// scalar is a scalar node as the library makes it: a plain scalar's tag
// is its resolved type, a quoted one's !!str.
func (a *nodeArena) scalar(value string, style yaml.Style, line, col int) *yaml.Node {
	n := a.node(yaml.Node{Kind: yaml.ScalarNode, Value: value, Style: style, Line: line, Column: col, Tag: "!!str"})
	if style == 0 {
		n.Tag = plainTag(value)
	}
	return n
}

// nodeArena allocates the nodes of a file, and the items' lists of them,
// in blocks: a large file has hundreds of thousands.
type nodeArena struct {
	nodes []yaml.Node
	ptrs  []*yaml.Node
}

const arenaBlock = 4096

// node returns a pointer to a copy of n.
func (a *nodeArena) node(n yaml.Node) *yaml.Node {
	if len(a.nodes) == cap(a.nodes) {
		a.nodes = make([]yaml.Node, 0, arenaBlock)
	}
	a.nodes = append(a.nodes, n)
	return &a.nodes[len(a.nodes)-1]
}

// content returns an empty list for an item's keys and values, with room
// for five fields.
func (a *nodeArena) content() []*yaml.Node {
	const room = 10
	if cap(a.ptrs)-len(a.ptrs) < room {
		a.ptrs = make([]*yaml.Node, 0, arenaBlock*room/4)
	}
	c := a.ptrs[len(a.ptrs) : len(a.ptrs) : len(a.ptrs)+room]
	a.ptrs = a.ptrs[:len(a.ptrs)+room]
	return c
}

// plainTag is the tag the library resolves a plain scalar to. Most values
// of a desired file (prefixes, rule specs, names) hold a character that
// no number or timestamp has and are none of the library's words (true,
// null, .inf, ...): they are strings, known without trying the library's
// number and time parsers, whose failures allocate.
func plainTag(v string) string {
	if _, word := yamlWords[v]; !word {
		for i := 0; i < len(v); i++ {
			if !strings.ContainsRune(numberChars, rune(v[i])) {
				return "!!str"
			}
		}
	}
	return (&yaml.Node{Kind: yaml.ScalarNode, Value: v}).ShortTag()
}

// numberChars are the characters of the library's ints (0x, 0o, 0b, _),
// floats and timestamps.
const numberChars = "0123456789abcdefABCDEFxXoObBtTzZ+-_.: "

// yamlWords are the plain scalars the library looks up rather than
// parses: bools, nulls, infinities, not-a-number, the merge key.
var yamlWords = map[string]struct{}{}

func init() {
	for _, w := range strings.Fields("true True TRUE false False FALSE ~ null Null NULL .nan .NaN .NAN .inf .Inf .INF +.inf +.Inf +.INF -.inf -.Inf -.INF <<") {
		yamlWords[w] = struct{}{}
	}
}

// splitIndent returns the number of spaces that line l starts with and
// the rest of the line after them.
func splitIndent(l []byte) (indent int, rest []byte) {
	for indent < len(l) && l[indent] == ' ' {
		indent++
	}
	return indent, l[indent:]
}
