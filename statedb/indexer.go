package statedb

import (
	"fmt"
	"net/netip"
	"strconv"

	"github.com/steadystate/steadystate/index"
)

// Index defines an index of a table of Obj, queried by values of type Key.
type Index[Obj any, Key any] struct {
	// Name identifies the index in queries and the HTTP API. It follows
	// the name rule of table names (see NewTable) and is unique within the
	// table.
	Name string

	// FromObject returns the object's keys in this index: exactly one for a
	// primary index, zero or more for a secondary index. It must depend on
	// the object only (objects are immutable once stored): a non-unique
	// index's keys are computed when the index replays the write (see
	// deferred_index.go), possibly at Commit or on another goroutine.
	FromObject func(obj Obj) index.KeySet

	// FromKey encodes a query key; it must encode the same way as
	// FromObject does for an object with that key.
	FromKey func(key Key) index.Key

	// FromString parses a key given as text (by the HTTP API and the CLI).
	// When nil, keys of type string, bool, any integer type, netip.Addr and
	// netip.Prefix are parsed with the standard library and passed to
	// FromKey; other key types cannot be queried from text.
	FromString func(key string) (index.Key, error)

	// PrefixFromString parses the beginning of a key given as text, for
	// prefix queries (the HTTP API's prefix and last, `db prefix`), where
	// FromString would refuse a key that is not whole: "254/" for the
	// routes of table 254 when keys read "254/10.0.0.0/8/0". When nil,
	// FromString parses prefixes too (right for string keys, whose text is
	// their encoding).
	PrefixFromString func(prefix string) (index.Key, error)

	// KeyFormat says how a key is written as text, for help and for the
	// error about a malformed key, such as "TABLE/PREFIX/METRIC". When
	// empty, keys parsed without FromString get one from their type ("an
	// IP address"); keys parsed by FromString have none.
	KeyFormat string

	// KeyExample is a key in that form, such as "254/10.0.0.0/8/0".
	// NewTable fails with ErrInvalidIndex if FromString (or the parse of
	// the key type) does not read it, so the example never lies.
	KeyExample string

	// Unique is true when no two objects share a key in this index. The
	// primary index must be unique.
	Unique bool
}

// Query returns a query for key in this index.
func (i Index[Obj, Key]) Query(key Key) Query[Obj] {
	return Query[Obj]{index: i.Name, key: i.FromKey(key)}
}

// QueryAll returns a query that matches every key of the index: Prefix
// walks the whole index in key order, Last finds its last object.
func (i Index[Obj, Key]) QueryAll() Query[Obj] {
	return Query[Obj]{index: i.Name, key: index.Key{}}
}

// QueryString parses key as text (see FromString) and returns a query for
// it. Its error wraps ErrBadQuery, names the index and says why the key is
// invalid (the table is named by the callers that know it, such as the
// HTTP API).
func (i Index[Obj, Key]) QueryString(key string) (Query[Obj], error) {
	k, err := i.fromString(key)
	if err != nil {
		return Query[Obj]{}, err
	}
	return Query[Obj]{index: i.Name, key: k}, nil
}

// ByRevision returns a query on a table's revision index, for use with
// LowerBound: it yields objects last written at or after rev, in revision
// order.
func ByRevision[Obj any](rev Revision) Query[Obj] {
	return Query[Obj]{index: RevisionIndex, key: index.Uint64(rev)}
}

// RevisionIndex is the name of the index every table keeps of its objects by
// revision. Index names starting with "_" are reserved for such indexes.
const RevisionIndex = "_revision"

func (i Index[Obj, Key]) indexName() string               { return i.Name }
func (i Index[Obj, Key]) isUnique() bool                  { return i.Unique }
func (i Index[Obj, Key]) fromObject(obj Obj) index.KeySet { return i.FromObject(obj) }

// fromString parses a key given as text; its error wraps ErrBadQuery and
// names the index.
func (i Index[Obj, Key]) fromString(s string) (index.Key, error) {
	if i.FromString != nil {
		k, err := i.FromString(s)
		if err != nil {
			return nil, fmt.Errorf("%w: index %q: bad key %q: %w", ErrBadQuery, i.Name, s, err)
		}
		return k, nil
	}
	key, err := parseKey[Key](s)
	if err != nil {
		return nil, fmt.Errorf("%w: index %q: bad key %q: %w", ErrBadQuery, i.Name, s, err)
	}
	return i.FromKey(key), nil
}

// parseKey parses s into a value of the basic type K.
func parseKey[K any](s string) (K, error) {
	var key K
	var err error
	switch p := any(&key).(type) {
	case *string:
		*p = s
	case *bool:
		*p, err = strconv.ParseBool(s)
	case *int:
		*p, err = strconv.Atoi(s)
	case *int64:
		*p, err = strconv.ParseInt(s, 0, 64)
	case *int32:
		var v int64
		v, err = strconv.ParseInt(s, 0, 32)
		*p = int32(v)
	case *int16:
		var v int64
		v, err = strconv.ParseInt(s, 0, 16)
		*p = int16(v)
	case *uint:
		var v uint64
		v, err = strconv.ParseUint(s, 0, strconv.IntSize)
		*p = uint(v)
	case *uint64:
		*p, err = strconv.ParseUint(s, 0, 64)
	case *uint32:
		var v uint64
		v, err = strconv.ParseUint(s, 0, 32)
		*p = uint32(v)
	case *uint16:
		var v uint64
		v, err = strconv.ParseUint(s, 0, 16)
		*p = uint16(v)
	case *uint8:
		var v uint64
		v, err = strconv.ParseUint(s, 0, 8)
		*p = uint8(v)
	case *netip.Addr:
		*p, err = netip.ParseAddr(s)
	case *netip.Prefix:
		*p, err = netip.ParsePrefix(s)
	default:
		err = fmt.Errorf("keys of type %T cannot be parsed from text (set Index.FromString)", key)
	}
	return key, err
}

func (i Index[Obj, Key]) valid() error {
	if i.FromObject == nil {
		return fmt.Errorf("%w: index %q has no FromObject", ErrInvalidIndex, i.Name)
	}
	if i.FromKey == nil {
		return fmt.Errorf("%w: index %q has no FromKey", ErrInvalidIndex, i.Name)
	}
	if i.KeyExample != "" {
		if _, err := i.fromString(i.KeyExample); err != nil {
			return fmt.Errorf("%w: index %q: KeyExample does not parse: %v", ErrInvalidIndex, i.Name, err)
		}
	}
	return nil
}

// QueryByPrimaryKey returns a query for an already encoded key in the
// table's primary index: for code that keeps keys rather than objects, such
// as a retry queue.
func QueryByPrimaryKey[Obj any](t Table[Obj], key index.Key) Query[Obj] {
	return Query[Obj]{index: t.meta().indexNames[0], key: key}
}
