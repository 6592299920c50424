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

// parseBlockYAML returns the document node of data as yaml.Unmarshal
// makes it, or ok false when data is not of the shape above.
func parseBlockYAML(data []byte) (doc *yaml.Node, ok bool) {
	for _, c := range data {
		if (c < 0x20 || c > 0x7e) && c != '\n' {
			return nil, false
		}
	}
	var a nodeArena
	top := a.node(yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"})
	var seq, item *yaml.Node
	dash, field := -1, -1 // columns (0-based) of the current sequence's dashes, of its item's fields
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
			key, after, ok := splitKey(rest)
			if !ok || len(bytes.TrimRight(after, " ")) > 0 || (seq != nil && len(seq.Content) == 0) {
				return nil, false
			}
			if len(top.Content) == 0 {
				top.Line, top.Column = n, 1
			}
			seq = a.node(yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"})
			top.Content = append(top.Content, a.scalar(key, 0, n, 1), seq)
			dash, item = -1, nil
		case rest[0] == '-':
			// An item of the current sequence: "- FIELD: SCALAR".
			if seq == nil || len(rest) < 2 || rest[1] != ' ' || dash >= 0 && indent != dash {
				return nil, false
			}
			f := indent + 2
			for f < len(l) && l[f] == ' ' {
				f++
			}
			if f == len(l) || l[f] == '-' || l[f] == '#' {
				return nil, false
			}
			if dash < 0 {
				dash = indent
				seq.Line, seq.Column = n, indent+1
			}
			field = f
			item = a.node(yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: n, Column: f + 1, Content: a.content()})
			seq.Content = append(seq.Content, item)
			if !a.addField(item, l, n, f) {
				return nil, false
			}
		default:
			// Another field of the current item, under its first.
			if item == nil || indent != field || !a.addField(item, l, n, field) {
				return nil, false
			}
		}
	}
	if len(top.Content) == 0 || len(seq.Content) == 0 {
		return nil, false
	}
	return &yaml.Node{Kind: yaml.DocumentNode, Line: top.Line, Column: 1, Content: []*yaml.Node{top}}, true
}

// addField adds the field "FIELD: SCALAR" that starts at column col of
// line l (number n) to item.
func (a *nodeArena) addField(item *yaml.Node, l []byte, n, col int) bool {
	key, after, ok := splitKey(l[col:])
	if !ok || len(after) < 2 || after[0] != ' ' {
		return false
	}
	vcol := col + len(key) + 2
	for vcol < len(l) && l[vcol] == ' ' {
		vcol++
	}
	value, style, ok := scalar(bytes.TrimRight(l[vcol:], " "))
	if !ok {
		return false
	}
	item.Content = append(item.Content, a.scalar(key, 0, n, col+1), a.scalar(value, style, n, vcol+1))
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

// scalar reads a one-line scalar of the shape: its value and style.
func scalar(b []byte) (value string, style yaml.Style, ok bool) {
	if style, ok = scalarShape(b); !ok {
		return "", 0, false
	}
	if style != 0 {
		return string(b[1 : len(b)-1]), style, true
	}
	return string(b), 0, true
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
