package index

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"unsafe"
)

// Key is an order-preserving encoded key. See the package doc for the
// ordering invariant.
type Key []byte

// String encodes s as its bytes; byte order equals Go's string order. The
// key shares the bytes of s rather than copying them (strings never change,
// and keys must not be modified, see the package doc), so indexing a
// string field costs no allocation.
func String(s string) Key {
	if len(s) == 0 {
		return Key{}
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// Bytes uses b as the key without copying it; b must not be modified after.
func Bytes(b []byte) Key { return Key(b) }

// Uint64 encodes n big-endian, so numeric order equals byte order.
func Uint64(n uint64) Key { return binary.BigEndian.AppendUint64(make(Key, 0, 8), n) }

// Uint32 encodes n big-endian in 4 bytes.
func Uint32(n uint32) Key { return binary.BigEndian.AppendUint32(make(Key, 0, 4), n) }

// Uint16 encodes n big-endian in 2 bytes.
func Uint16(n uint16) Key { return binary.BigEndian.AppendUint16(make(Key, 0, 2), n) }

// Int64 encodes n in 8 bytes with the sign bit flipped, so that negative
// numbers sort before positive ones.
func Int64(n int64) Key { return Uint64(uint64(n) ^ (1 << 63)) }

// Int encodes n with the full 64 bits and the same ordering as Int64.
func Int(n int) Key { return Int64(int64(n)) }

// Bool encodes false as 0 and true as 1.
func Bool(b bool) Key {
	if b {
		return Key{1}
	}
	return Key{0}
}

// Address family tags; they make IPv4 sort before IPv6 and keep the zero
// (invalid) address first.
const (
	familyInvalid byte = 0
	familyV4      byte = 4
	familyV6      byte = 6
)

// NetIPAddr encodes a as a family byte followed by the address bytes (4 for
// IPv4, 16 for IPv6) and, for scoped IPv6 addresses, the zone. The order is
// the same as netip.Addr.Compare.
func NetIPAddr(a netip.Addr) Key {
	return appendAddr(make(Key, 0, 1+16), a)
}

func appendAddr(k Key, a netip.Addr) Key {
	switch {
	case !a.IsValid():
		return append(k, familyInvalid)
	case a.Is4():
		b := a.As4()
		return append(append(k, familyV4), b[:]...)
	default:
		b := a.As16()
		k = append(append(k, familyV6), b[:]...)
		return append(k, a.Zone()...)
	}
}

// NetIPPrefix encodes p as its address (see NetIPAddr, zone dropped) followed
// by one byte of prefix length, so prefixes sort by family, then address, then
// length: 10.0.0.0/8 < 10.0.0.0/16 < 10.1.0.0/16. The address is used as
// given; callers that want 10.1.2.3/8 and 10.0.0.0/8 to be one key should
// pass p.Masked().
func NetIPPrefix(p netip.Prefix) Key {
	return AppendNetIPPrefix(make(Key, 0, 1+16+1), p)
}

// AppendNetIPPrefix appends NetIPPrefix(p) to k, for a key of several
// parts built in one allocation.
func AppendNetIPPrefix(k Key, p netip.Prefix) Key {
	k = appendAddr(k, p.Addr().WithZone(""))
	if !p.IsValid() {
		return k
	}
	return append(k, byte(p.Bits()))
}

// Stringer encodes s.String(), as String does.
func Stringer[T fmt.Stringer](s T) Key { return String(s.String()) }
