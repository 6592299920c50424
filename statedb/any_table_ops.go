package statedb

// Query operations of the HTTP API and the db command set beyond those of
// any_table.go, named here once so that the code serving them and the code
// sending them agree. anyQuery answers ErrBadQuery for an unknown one.
const (
	// QueryLPM returns the objects of the longest prefix in an LPM index
	// that contains the key (an address or a prefix); see LPMIndex. On an
	// LPM index, get and list do the same (get: the first object only);
	// on another index it is ErrBadQuery.
	QueryLPM QueryOp = "lpm"
	// QueryLast returns the last object of an index (with a key: the last
	// object under that prefix); see Table.Last.
	QueryLast QueryOp = "last"
	// QueryReverseLowerBound returns the objects whose key is <= the key,
	// in descending key order; see Table.ReverseLowerBound.
	QueryReverseLowerBound QueryOp = "reverse-lowerbound"
)
