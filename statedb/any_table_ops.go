package statedb

// Query operations planned for the HTTP API and the db command set, named
// here once so that the code serving them and the code sending them agree.
// anyQuery answers ErrBadQuery for an operation it does not implement yet.
const (
	// QueryLPM returns the objects of the longest prefix in an LPM index
	// that contains the key (an address or a prefix); see LPMIndex.
	QueryLPM QueryOp = "lpm"
	// QueryLast returns the last object of an index (with a key: the last
	// object under that prefix).
	QueryLast QueryOp = "last"
	// QueryReverseLowerBound returns the objects whose key is <= the key,
	// in descending key order.
	QueryReverseLowerBound QueryOp = "reverse-lowerbound"
)
