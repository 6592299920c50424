// Package index encodes values as order-preserving byte keys for statedb
// indexes.
//
// Invariant: for every encoder, comparing two encoded keys with bytes.Compare
// gives the same result as comparing the values they encode in their natural
// order. Signed integers sort negatives before positives, addresses and
// prefixes sort as numbers (IPv4 before IPv6, then by address, then by prefix
// length). This is what makes LowerBound and range scans over a radix tree
// meaningful.
//
// Keys are immutable once returned: statedb keeps them in its trees, so a
// caller must not modify the bytes of a Key it handed to an index.
package index
