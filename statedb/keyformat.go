package statedb

import (
	"fmt"
	"net/netip"

	"github.com/steadystate/steadystate/index"
)

// KeyFormat says how the keys of one index are written as text: what the
// HTTP API's queries and the db commands take. TableInfo lists one per
// index, so that a client can show every table's key format with an
// example (`db help`), and the API's error about a malformed key names the
// index's.
type KeyFormat struct {
	Index   string `json:"index"`
	Primary bool   `json:"primary,omitempty"`
	Unique  bool   `json:"unique"`
	LPM     bool   `json:"lpm,omitempty"` // a longest-prefix-match index (LPMIndex)
	// Format is Index.KeyFormat, or the key type's ("an IP address");
	// empty when the index does not say.
	Format string `json:"format,omitempty"`
	// Example is Index.KeyExample, or the key type's; empty when the index
	// gives none.
	Example string `json:"example,omitempty"`
}

// String returns "FORMAT, e.g. EXAMPLE", or what of it is known ("" when
// nothing is).
func (f KeyFormat) String() string {
	switch {
	case f.Format != "" && f.Example != "":
		return f.Format + ", e.g. " + f.Example
	case f.Example != "":
		return "e.g. " + f.Example
	}
	return f.Format
}

func (i Index[Obj, Key]) keyFormat() KeyFormat {
	f := KeyFormat{Index: i.Name, Unique: i.Unique, Format: i.KeyFormat, Example: i.KeyExample}
	if i.FromString == nil && f.Format == "" {
		var example string
		f.Format, example = typeKeyFormat[Key]()
		if f.Example == "" {
			f.Example = example
		}
	}
	return f
}

// PrefixQueryString parses the beginning of a key given as text (see
// PrefixFromString) and returns a query for Prefix or Last: the objects
// whose key starts with it. Its error wraps ErrBadQuery and names the
// index.
func (i Index[Obj, Key]) PrefixQueryString(prefix string) (Query[Obj], error) {
	k, err := i.prefixFromString(prefix)
	if err != nil {
		return Query[Obj]{}, err
	}
	return Query[Obj]{index: i.Name, key: k}, nil
}

// prefixFromString parses the beginning of a key (see PrefixFromString);
// its error wraps ErrBadQuery and names the index.
func (i Index[Obj, Key]) prefixFromString(s string) (index.Key, error) {
	if i.PrefixFromString == nil {
		return i.fromString(s)
	}
	k, err := i.PrefixFromString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: index %q: bad key prefix %q: %w", ErrBadQuery, i.Name, s, err)
	}
	return k, nil
}

// typeKeyFormat describes the text keys that parseKey reads for type K,
// with an example that it reads.
func typeKeyFormat[K any]() (format, example string) {
	var key K
	switch any(key).(type) {
	case string:
		return "text", ""
	case bool:
		return "true or false", "true"
	case int, int64, int32, int16:
		return "an integer", "1"
	case uint, uint64, uint32, uint16, uint8:
		return "a non-negative integer", "1"
	case netip.Addr:
		return "an IP address", "192.0.2.1"
	case netip.Prefix:
		return "an IP prefix", "192.0.2.0/24"
	}
	return "", ""
}

func (i LPMIndex[Obj]) keyFormat() KeyFormat {
	return KeyFormat{Index: i.Name, Unique: i.Unique, LPM: true, Format: "an IP address or prefix", Example: "192.0.2.1"}
}

// revisionKeyFormat is the revision index's.
var revisionKeyFormat = KeyFormat{Index: RevisionIndex, Unique: true, Format: "a revision", Example: "1"}

// keyFormats returns the key format of each index of the table, in the
// order of Indexes.
func (t *table[Obj]) keyFormats() []KeyFormat {
	out := make([]KeyFormat, 0, len(t.secondary)+2)
	for i := range len(t.secondary) + 1 {
		f := KeyFormat{Index: t.indexer(i).indexName(), Unique: t.indexer(i).isUnique()}
		if kf, ok := t.indexer(i).(interface{ keyFormat() KeyFormat }); ok {
			f = kf.keyFormat()
		}
		f.Primary = i == 0
		out = append(out, f)
	}
	return append(out, revisionKeyFormat)
}

// parseQueryKey parses the key of a query given as text for op on index pos:
// a prefix of a key for prefix and last, a whole key otherwise. A bad key's
// error names the index's key format and example.
func (t *table[Obj]) parseQueryKey(op QueryOp, pos int, key string) (index.Key, error) {
	idx := t.indexer(pos)
	parse := idx.fromString
	if p, ok := idx.(interface {
		prefixFromString(string) (index.Key, error)
	}); ok && (op == QueryPrefix || op == QueryLast) {
		parse = p.prefixFromString
	}
	k, err := parse(key)
	if err != nil {
		if kf, ok := idx.(interface{ keyFormat() KeyFormat }); ok {
			if f := kf.keyFormat().String(); f != "" {
				err = fmt.Errorf("%w (keys of index %q: %s)", err, idx.indexName(), f)
			}
		}
		return nil, err
	}
	return k, nil
}
