package statedb

import (
	"errors"
	"fmt"
	"iter"
	"net/netip"
	"strings"

	"github.com/steadystate/steadystate/index"
)

// LPMIndex is a secondary index of objects by IP prefixes (netip.Prefix)
// that answers longest-prefix-match queries: "which route covers
// 10.1.2.3?". An object may have several prefixes; with Unique, no two
// objects share a prefix.
//
// On a query built by Query or QueryPrefix:
//
//   - Get returns the first object (in primary key order) of the longest
//     stored prefix that contains the address or prefix, and List every
//     object of that prefix; their ...Watch twins close when that answer
//     may have changed.
//   - Matches returns the objects of every stored prefix that contains it,
//     longest prefix first.
//   - Prefix returns the objects of every stored prefix that lies within
//     the query's prefix (the prefix itself included), in index order.
//   - LowerBound, ReverseLowerBound and Last work in index order: by
//     address, then by prefix length (10.0.0.0/8 < 10.0.0.0/16 <
//     10.1.0.0/16), IPv4 before IPv6.
//
// IPv4 and IPv6 are kept apart: an IPv4 address matches only IPv4
// prefixes, and an IPv4-mapped IPv6 address (::ffff:10.1.2.3) is an IPv6
// address that matches only IPv6 prefixes (such as ::ffff:10.0.0.0/104);
// unmap it (netip.Addr.Unmap) to look it up among IPv4 prefixes. Prefixes
// are stored masked (10.1.2.3/8 is 10.0.0.0/8) and without zone. Invalid
// prefixes (the zero netip.Prefix) are not indexed. A query for an invalid
// address or prefix finds nothing with Get, List, Matches, Prefix and
// Last; in index order it comes before every prefix.
//
// An LPMIndex cannot be a table's primary index. It is kept in the same
// persistent radix tree as every other index (see the key layout in
// lpm.go), so it takes part in transactions, snapshots, change iterators
// and the HTTP API (operation "lpm", or get and list, with keys such as
// "10.1.2.3" or "10.0.0.0/8") like any index.
type LPMIndex[Obj any] struct {
	// Name identifies the index in queries and the HTTP API; the name rule
	// of Index.Name applies.
	Name string

	// FromObject returns the object's prefixes: zero or more. Like
	// Prefix, it must depend on the object only: a non-unique index's
	// keys are computed when it replays the write (see Index.FromObject).
	FromObject func(obj Obj) []netip.Prefix

	// Prefix, set instead of FromObject, returns the object's one prefix
	// (an invalid one, such as the zero netip.Prefix, for none). An
	// object's write then builds its key in the transaction's buffer: no
	// slice of prefixes nor key is allocated for it (a routes table's
	// covering index took four allocations for each status written).
	Prefix func(obj Obj) netip.Prefix

	// Unique is true when no two objects share a prefix. An Insert that
	// would break it fails with ErrUniqueConstraint.
	Unique bool
}

// Query returns a longest-prefix-match query for an address: the stored
// prefixes that contain addr.
func (i LPMIndex[Obj]) Query(addr netip.Addr) Query[Obj] {
	if !addr.IsValid() {
		return Query[Obj]{index: i.Name, key: lpmNoKey}
	}
	return Query[Obj]{index: i.Name, addr: addr.WithZone("")}
}

// QueryPrefix returns a query for a prefix: with Get, List and Matches the
// stored prefixes that contain p (p itself included), with Prefix those
// that p contains.
func (i LPMIndex[Obj]) QueryPrefix(p netip.Prefix) Query[Obj] {
	return Query[Obj]{index: i.Name, key: lpmKey(p)}
}

// QueryAll returns a query that matches every key of the index: Prefix
// walks the whole index in order, Last finds its last object.
func (i LPMIndex[Obj]) QueryAll() Query[Obj] {
	return Query[Obj]{index: i.Name, key: index.Key{}}
}

// QueryString parses an address ("10.1.2.3", "2001:db8::1") or a prefix
// ("10.0.0.0/8") and returns the query for it, as Query or QueryPrefix
// would. Its error wraps ErrBadQuery and names the index.
func (i LPMIndex[Obj]) QueryString(key string) (Query[Obj], error) {
	k, err := i.fromString(key)
	if err != nil {
		return Query[Obj]{}, err
	}
	return Query[Obj]{index: i.Name, key: k}, nil
}

func (i LPMIndex[Obj]) indexName() string { return i.Name }
func (i LPMIndex[Obj]) isUnique() bool    { return i.Unique }
func (i LPMIndex[Obj]) isLPM()            {}

func (i LPMIndex[Obj]) fromObject(obj Obj) index.KeySet {
	if i.Prefix != nil {
		if p := i.Prefix(obj); p.IsValid() {
			return index.NewKeySet(lpmKey(p))
		}
		return index.KeySet{}
	}
	prefixes := i.FromObject(obj)
	switch len(prefixes) {
	case 0:
		return index.KeySet{}
	case 1:
		if !prefixes[0].IsValid() {
			return index.KeySet{}
		}
		return index.NewKeySet(lpmKey(prefixes[0]))
	}
	keys := make([]index.Key, 0, len(prefixes))
	for _, p := range prefixes {
		if p.IsValid() {
			keys = append(keys, lpmKey(p))
		}
	}
	return index.NewKeySet(keys...)
}

// fromString parses an address or a prefix; its error wraps ErrBadQuery
// and names the index.
func (i LPMIndex[Obj]) fromString(s string) (index.Key, error) {
	k, err := parseLPMKey(s)
	if err != nil {
		return nil, fmt.Errorf("%w: index %q: bad key %q: %w", ErrBadQuery, i.Name, s, err)
	}
	return k, nil
}

func (i LPMIndex[Obj]) valid() error {
	switch {
	case i.FromObject == nil && i.Prefix == nil:
		return fmt.Errorf("%w: index %q has no FromObject (or Prefix)", ErrInvalidIndex, i.Name)
	case i.FromObject != nil && i.Prefix != nil:
		return fmt.Errorf("%w: index %q has both FromObject and Prefix: set one", ErrInvalidIndex, i.Name)
	}
	return nil
}

// keyAppender is, for an index with Prefix, the function that appends an
// object's key to a buffer (ok false: the object has none); nil otherwise.
func (i LPMIndex[Obj]) keyAppender() func(dst []byte, obj Obj) ([]byte, bool) {
	if i.Prefix == nil {
		return nil
	}
	return func(dst []byte, obj Obj) ([]byte, bool) {
		p := i.Prefix(obj)
		if !p.IsValid() {
			return dst, false
		}
		return lpmAppendKey(dst, p), true
	}
}

// parseLPMKey parses "10.1.2.3" (a full-length prefix) or "10.0.0.0/8".
func parseLPMKey(s string) (index.Key, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, err
		}
		return lpmKey(p), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return nil, errors.New("want an IP address (10.1.2.3) or prefix (10.0.0.0/8)")
	}
	return lpmKey(netip.PrefixFrom(a, a.BitLen())), nil
}

// The key layout of an LPM index. A prefix is encoded as its family
// ('4' or '6') followed by one byte per prefix bit, '0' or '1', of the
// masked address: 10.0.0.0/8 is "400001010". So the path of a prefix in
// the radix tree is its bit path, a prefix's key is a prefix of the keys
// of the prefixes it contains, and byte order is the documented index
// order (address, then length; a prefix before the longer prefixes within
// it). The keys hold no 0x00 byte, so every entry is stored like that of a
// non-unique index (key, 0x00 0x00, primary key; see appendNonUnique),
// unique or not: the entries of prefix k are the tree keys that start with
// k+0x00, and radix's Matches finds, in one walk down the query's bits,
// every length d whose q[:d]+0x00 starts some tree key. Each byte is
// printable, so a key in an error message reads as its bits.
const (
	lpmFamily4 = '4'
	lpmFamily6 = '6'
	// lpmSep follows a prefix's key in every tree key of the index.
	lpmSep = 0x00
)

// lpmNoKey is the key of a query for an invalid address or prefix: no
// stored key starts with it.
var lpmNoKey = index.Key("-")

// lpmBits holds, for every byte value, its eight bits as '0'/'1' bytes.
var lpmBits = func() (t [256][8]byte) {
	for b := range t {
		for i := range 8 {
			t[b][i] = '0' + byte(b>>(7-i))&1
		}
	}
	return t
}()

// lpmKeyBuf holds the longest LPM key: the family byte and 128 bits.
type lpmKeyBuf [1 + 128]byte

// lpmKey returns the key of p, masked and without zone (see above); an
// invalid p gets lpmNoKey.
func lpmKey(p netip.Prefix) index.Key {
	if !p.IsValid() {
		return lpmNoKey
	}
	return lpmAppendKey(make(index.Key, 0, 1+p.Bits()), p)
}

// lpmAppendKey appends the key of the valid prefix p to dst.
func lpmAppendKey(dst []byte, p netip.Prefix) index.Key {
	bits := p.Bits()
	var a [16]byte
	family := byte(lpmFamily6)
	if p.Addr().Is4() {
		family = lpmFamily4
		a4 := p.Addr().As4()
		copy(a[:], a4[:])
	} else {
		a = p.Addr().As16()
	}
	n := len(dst)
	dst = append(dst, family)
	dst = append(dst, make([]byte, bits)...)
	// Whole bytes of the address eight bits at a time, then the rest; bits
	// beyond the prefix length are never read, which masks the address.
	out := dst[n+1:]
	i := 0
	for ; i+8 <= bits; i += 8 {
		copy(out[i:i+8], lpmBits[a[i/8]][:])
	}
	copy(out[i:], lpmBits[a[i/8%16]][:bits-i])
	return dst
}

// lpmPrefix decodes an LPM index key; ok is false for anything lpmKey
// does not return for a valid prefix.
func lpmPrefix(k []byte) (p netip.Prefix, ok bool) {
	if len(k) == 0 {
		return p, false
	}
	var maxBits int
	switch k[0] {
	case lpmFamily4:
		maxBits = 32
	case lpmFamily6:
		maxBits = 128
	default:
		return p, false
	}
	bits := k[1:]
	if len(bits) > maxBits {
		return p, false
	}
	var a [16]byte
	for i, c := range bits {
		switch c {
		case '1':
			a[i/8] |= 0x80 >> (i % 8)
		case '0':
		default:
			return p, false
		}
	}
	addr := netip.AddrFrom16(a)
	if maxBits == 32 {
		addr = netip.AddrFrom4([4]byte(a[:4]))
	}
	return netip.PrefixFrom(addr, len(bits)), true
}

// lpmMatches yields the groups of prefixes that contain the query key in
// the LPM index tree root, longest first: each group's subtree holds the
// entries of one prefix, in primary key order.
func lpmMatches(root *treeNode, key []byte, yield func(d int, group *treeNode) bool) {
	root.Matches(key, lpmSep, yield)
}

// lpmLongest returns the length of the longest prefix that contains key
// and the subtree of its entries (nil, 0 if none).
func lpmLongest(root *treeNode, key []byte) (d int, group *treeNode) {
	lpmMatches(root, key, func(n int, g *treeNode) bool {
		d, group = n, g
		return false
	})
	return d, group
}

// lpmFirst is Get on the LPM index tree root: the first entry of the
// longest prefix that contains key. It is kept out of line, so that Get's
// other paths stay small.
//
//go:noinline
func lpmFirst(root *treeNode, key []byte) (object, bool) {
	_, group := lpmLongest(root, key)
	_, o, found := group.Minimum()
	return o, found
}

// lpmWatch returns the channel that closes when a prefix of at least d
// bytes of key gains or loses an entry (at least the family byte): every
// such tree key starts with key[:d].
func lpmWatch(root *treeNode, key []byte, d int) <-chan struct{} {
	_, ch := root.PrefixWatch(key[:min(len(key), max(d, 1))])
	return ch
}

// lpmGet is Get (and with watch GetWatch, List and ListWatch) on the LPM
// index tree root (nil: a table not in the snapshot): the entries of the
// longest prefix that contains the query.
func lpmGet(root *treeNode, key []byte, watch bool) (group *treeNode, ch <-chan struct{}) {
	d, group := lpmLongest(root, key)
	if watch {
		ch = lpmWatch(root, key, d)
	}
	return group, ch
}

func (t *table[Obj]) Matches(txn ReadTxn, q Query[Obj]) iter.Seq2[Obj, Revision] {
	seq, _ := t.matches(txn, q, false)
	return seq
}

func (t *table[Obj]) MatchesWatch(txn ReadTxn, q Query[Obj]) (iter.Seq2[Obj, Revision], <-chan struct{}) {
	return t.matches(txn, q, true)
}

func (t *table[Obj]) matches(txn ReadTxn, q Query[Obj], watch bool) (iter.Seq2[Obj, Revision], <-chan struct{}) {
	pos := t.indexPos(q.index)
	if !t.lpm[pos] {
		panic(fmt.Sprintf("statedb: table %q: Matches needs a query on an LPMIndex, and index %q is not one", t.name, q.index))
	}
	_, root := t.snapshotRoot(txn, pos)
	var ch <-chan struct{}
	if watch {
		// Any prefix of the query's family may gain or lose an entry.
		ch = lpmWatch(root, q.Key(), 1)
	}
	key := q.Key()
	return func(yield func(Obj, Revision) bool) {
		lpmMatches(root, key, func(_ int, group *treeNode) bool {
			more := true
			group.All(func(_ []byte, o object) bool {
				more = yield(t.obj(o), o.revision)
				return more
			})
			return more
		})
	}, ch
}
