package index

import "iter"

// KeySet is zero or more keys of one object in one index. An index whose
// objects carry several values (tags, addresses) returns one key per value.
//
// The first key is held inline so that the common case of exactly one key
// costs no allocation beyond the key itself.
type KeySet struct {
	head Key
	tail []Key
	n    int
}

// NewKeySet returns a set of the given keys. The keys slice is not retained.
func NewKeySet(keys ...Key) KeySet {
	switch len(keys) {
	case 0:
		return KeySet{}
	case 1:
		return KeySet{head: keys[0], n: 1}
	default:
		return KeySet{head: keys[0], tail: append([]Key(nil), keys[1:]...), n: len(keys)}
	}
}

// Len returns the number of keys.
func (ks KeySet) Len() int { return ks.n }

// First returns the first key, or nil when the set is empty.
func (ks KeySet) First() Key { return ks.head }

// At returns the i'th key; it panics when i is out of range like a slice.
func (ks KeySet) At(i int) Key {
	if i == 0 && ks.n > 0 {
		return ks.head
	}
	return ks.tail[i-1]
}

// All yields every key in the order they were given.
func (ks KeySet) All() iter.Seq[Key] {
	return func(yield func(Key) bool) {
		if ks.n == 0 || !yield(ks.head) {
			return
		}
		for _, k := range ks.tail {
			if !yield(k) {
				return
			}
		}
	}
}

// Foreach calls fn for each key; it is cheaper than All in hot paths.
func (ks KeySet) Foreach(fn func(Key)) {
	if ks.n == 0 {
		return
	}
	fn(ks.head)
	for _, k := range ks.tail {
		fn(k)
	}
}
