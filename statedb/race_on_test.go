//go:build race

package statedb

// raceEnabled: the race detector is on, and its instrumentation may
// allocate where a normal build does not.
const raceEnabled = true
